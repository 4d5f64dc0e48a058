# shellcheck shell=sh
# Sourced (". pip-preflight.sh") at the start of every Dockerfile RUN that downloads with pip.
#  1. If the optional BuildKit secret "ca" is mounted (make CA_BUNDLE=...), pip, requests and
#     OpenSSL use it: needed behind TLS-intercepting proxies. The bundle never lands in a layer.
#  2. An empty PIP_INDEX_URL build arg means "pip's default index", not an empty URL.
#  3. pip retries a dead index for minutes; instead this checks the index once, with a short
#     timeout, and fails with a message naming the index and the CA bundle used.

ca=/run/secrets/ca
if [ -s "$ca" ]; then
  export PIP_CERT="$ca" REQUESTS_CA_BUNDLE="$ca" SSL_CERT_FILE="$ca"
  ca_used="CA bundle: $ca"
else
  ca_used="CA bundle: none; make CA_BUNDLE=FILE adds one"
fi
if [ -z "${PIP_INDEX_URL:-}" ]; then unset PIP_INDEX_URL; fi
export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
       PIP_RETRIES="${PIP_RETRIES:-2}" PIP_DEFAULT_TIMEOUT="${PIP_DEFAULT_TIMEOUT:-30}"

python3 - "${PIP_INDEX_URL:-https://pypi.org/simple}" "$ca_used" <<'PY' || exit 1
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request

index, ca_used = sys.argv[1], sys.argv[2]
# Never echo credentials embedded in the index URL into the build log.
parts = urllib.parse.urlsplit(index)
shown = parts._replace(netloc=parts.hostname or "").geturl() if parts.password else index
url = index.rstrip("/") + "/pip/"
try:
    with urllib.request.urlopen(url, timeout=15) as response:
        response.read(1)
except urllib.error.HTTPError as err:
    # 404: the server answered (an index may lack this project); anything else is fatal.
    if err.code != 404:
        sys.exit(f"cannot reach package index {shown}: HTTP {err.code} {err.reason} ({ca_used})")
except (urllib.error.URLError, ssl.SSLError, OSError) as err:
    reason = getattr(err, "reason", err)
    if isinstance(reason, ssl.SSLCertVerificationError):
        reason = f"certificate verify failed: {reason.verify_message or reason}"
    sys.exit(f"cannot reach package index {shown}: {reason} ({ca_used})")
print(f"pip-preflight: package index {shown} reachable ({ca_used})")
PY
