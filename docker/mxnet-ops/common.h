// What the operators of this library share: lib_api's names, and the reading of the attribute strings MXNet hands
// them (its Python frontend writes each value with str(): "(14, 14)", "0.0625", "True").
#ifndef MXNET_OPS_COMMON_H_
#define MXNET_OPS_COMMON_H_

#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "mxnet/lib_api.h"

namespace mxnet_ops {

using mxnet::ext::kFloat32;
using mxnet::ext::MX_FAIL;
using mxnet::ext::MX_SUCCESS;
using mxnet::ext::MXReturnValue;
using mxnet::ext::MXTensor;
using mxnet::ext::OpResource;
using Attrs = std::unordered_map<std::string, std::string>;

inline std::string attr(const Attrs& attrs, const char* key, const char* fallback) {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second;
}

inline int int_attr(const Attrs& attrs, const char* key, int fallback) {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : static_cast<int>(std::strtol(it->second.c_str(), nullptr, 10));
}

// A float, as MXNet's parameter parser reads it (strtof: the nearest float to the decimal).
inline float float_attr(const Attrs& attrs, const char* key, float fallback) {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : std::strtof(it->second.c_str(), nullptr);
}

inline bool bool_attr(const Attrs& attrs, const char* key, bool fallback) {
  auto it = attrs.find(key);
  return it == attrs.end() ? fallback : (it->second == "True" || it->second == "true" || it->second == "1");
}

inline const float* floats(const MXTensor& tensor) { return static_cast<const float*>(tensor.data_ptr); }

// The operators' type inference: every input float32, and so the output.
inline MXReturnValue float32_only(const char* op, const std::vector<int>& in_types, std::vector<int>* out_types) {
  for (size_t i = 0; i < in_types.size(); i++) {
    if (in_types[i] != kFloat32) {
      MX_ERROR_MSG << op << " supports float32 only; input " << i << " is type " << in_types[i];
      return MX_FAIL;
    }
  }
  out_types->at(0) = kFloat32;
  return MX_SUCCESS;
}

}  // namespace mxnet_ops

#endif  // MXNET_OPS_COMMON_H_
