"""The image's MXNet imports scipy, setuptools' distutils, mxnet.test_utils and requests on first use, not at
`import mxnet` (docker/mxnet-lazy-imports.patch), and what uses them still works. Runs inside the image
(`make image-tests`); each case in a fresh interpreter, where nothing has imported them yet."""

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("mxnet", reason="needs the image's MXNet: run inside the image (make image-tests)")

LAZY = ("scipy", "setuptools", "distutils", "requests", "mxnet.test_utils")

# Prepended to each case: loaded(prefix) lists the modules of a package that are imported.
PRELUDE = """
import sys
def loaded(*prefixes):
    return sorted(m for m in sys.modules for p in prefixes if m == p or m.startswith(p + "."))
"""


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_import_mxnet_and_horovod_and_everyday_ndarray_work_load_none_of_them():
    out = run(f"""
        import mxnet as mx, horovod.mxnet as hvd
        import numpy as np
        x = mx.nd.array(np.ones((2, 3)))  # mx.nd.array checks for a scipy matrix
        csr = mx.nd.sparse.array(x.tostype("csr"))
        y = mx.nd.sparse.csr_matrix(csr)
        (x + y.tostype("default")).asnumpy()
        print(loaded(*{LAZY!r}))
    """)
    assert out.strip() == "[]"


def test_scipy_sparse_matrices_convert_both_ways():
    run("""
        import mxnet as mx
        import numpy as np
        import scipy.sparse as spsp
        dense = np.array([[0, 1, 0], [2, 0, 3]], dtype=np.float32)
        m = spsp.csr_matrix(dense)
        for made in (mx.nd.sparse.csr_matrix(m), mx.nd.array(m), mx.nd.sparse.array(m)):
            assert made.stype == "csr" and made.dtype == np.float32, made
            assert (made.asnumpy() == dense).all()
        assert (mx.nd.sparse.csr_matrix(m).asscipy() != m).nnz == 0
    """)


def test_scipy_is_imported_where_mxnet_builds_a_scipy_matrix():
    out = run("""
        import mxnet as mx
        import numpy as np
        before = loaded("scipy")
        coo = mx.nd.sparse.csr_matrix(([1.0, 2.0], ([0, 1], [2, 0])), shape=(2, 3))  # built through scipy's coo
        assert (coo.asnumpy() == np.array([[0, 0, 1], [2, 0, 0]])).all()
        print(before, "scipy.sparse" in loaded("scipy"), type(coo.asscipy()).__name__)
    """)
    assert out.split() == ["[]", "True", "csr_matrix"]


def test_entropy_calibration_imports_scipy_stats():
    out = run("""
        import numpy as np
        from mxnet.contrib import quantization
        data = np.random.default_rng(0).normal(size=10000)
        hist, edges = np.histogram(data, bins=1001, range=(-5, 5))
        before = loaded("scipy")
        thresholds = quantization._get_optimal_thresholds({"x": (hist, edges, data.min(), data.max(), 5.0)}, "int8")
        low, high = thresholds["x"]
        assert 0 < float(high) <= 5 and float(low) == -float(high), thresholds
        print(before, "scipy.stats" in loaded("scipy"))
    """)
    assert out.split() == ["[]", "True"]


def test_test_utils_on_first_use_with_scipy_stats():
    out = run("""
        import mxnet as mx
        before = loaded("mxnet.test_utils", "scipy")
        import scipy.stats as ss
        buckets, probs = mx.test_utils.gen_buckets_probs_with_ppf(lambda x: ss.norm.ppf(x, 0, 1), 5)
        generator = lambda n: mx.nd.random.normal(0, 1, shape=(n,)).asnumpy()
        mx.random.seed(0)
        mx.test_utils.verify_generator(generator, buckets, probs, nsamples=10000, nrepeat=3)  # chi-square test
        from mxnet.test_utils import assert_almost_equal
        assert_almost_equal(mx.nd.ones((2,)), mx.nd.ones((2,)))
        print(before)
    """)
    assert out.strip().splitlines()[-1] == "[]"


def test_images_decode_and_recordio_packs_with_cv2():
    run("""
        import mxnet as mx
        import numpy as np
        img = np.zeros((8, 8, 3), dtype=np.uint8)
        img[2:6, 2:6] = (10, 200, 30)
        header = mx.recordio.IRHeader(0, 1.0, 7, 0)
        packed = mx.recordio.pack_img(header, img, img_fmt=".png")  # cv2.imencode
        got_header, decoded = mx.recordio.unpack_img(packed)  # cv2.imdecode
        assert got_header.id == 7 and (decoded == img).all()
        _, png = mx.recordio.unpack(packed)
        rgb = mx.image.imdecode(png).asnumpy()  # MXNet's own decoder, RGB
        assert (rgb == img[:, :, ::-1]).all()
    """)


def test_gluon_download_imports_requests_when_it_downloads(tmp_path):
    (tmp_path / "served").mkdir()
    (tmp_path / "served" / "weights.bin").write_bytes(b"weights")
    out = run(f"""
        import functools, hashlib, http.server, threading
        import mxnet as mx
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory={str(tmp_path / "served")!r})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{{server.server_port}}/weights.bin"
        before = loaded("requests")
        path = mx.gluon.utils.download(url, path={str(tmp_path / "got.bin")!r},
                                       sha1_hash=hashlib.sha1(b"weights").hexdigest())
        print(before, open(path, "rb").read().decode(), bool(loaded("requests")))
        server.shutdown()
    """)
    assert out.split()[-3:] == ["[]", "weights", "True"]
