# SPDX-License-Identifier: Apache-2.0
"""meshccl's Python packages: `meshccl` (ctypes, numpy) and `meshccl_torch`
(the torch.distributed backend, a C++ extension built with
torch.utils.cpp_extension when torch is importable).

The extension compiles against include/ and links build/lib/libmeshccl.so of
this source tree unless MESHCCL_INCLUDE_DIR / MESHCCL_LIB_DIR say otherwise
(e.g. /usr/local/include/meshccl and /usr/local/lib after `make install`). Nothing is
downloaded: `make python` runs this file, and so can
`pip install --no-build-isolation --no-deps ./python`.
"""
import os
import re
import sys

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
INCLUDE_DIR = os.environ.get("MESHCCL_INCLUDE_DIR", os.path.join(ROOT, "include"))
LIB_DIR = os.environ.get("MESHCCL_LIB_DIR", os.path.join(ROOT, "build", "lib"))
CSRC = os.path.join(HERE, "meshccl_torch", "csrc")


def version():
    try:
        with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
            m = re.search(r"project\(meshccl VERSION ([0-9.]+)", f.read())
            if m:
                return m.group(1)
    except OSError:
        pass
    return "0"


ext_modules = []
cmdclass = {}
try:
    import torch  # noqa: F401
    from torch.utils.cpp_extension import BuildExtension, CppExtension
except ImportError:
    torch = None

if torch is not None and os.environ.get("MESHCCL_NO_TORCH") != "1":
    if not os.path.exists(os.path.join(INCLUDE_DIR, "nccl.h")):
        sys.exit("setup.py: no nccl.h in %s: set MESHCCL_INCLUDE_DIR" % INCLUDE_DIR)
    ext_modules.append(
        CppExtension(
            "meshccl_torch._C",
            sources=[os.path.join("meshccl_torch", "csrc", f)
                     for f in ("module.cpp", "process_group_meshccl.cpp")],
            depends=[os.path.join(CSRC, "process_group_meshccl.hpp"),
                     os.path.join(CSRC, "torch_compat.hpp"),
                     os.path.join(INCLUDE_DIR, "nccl.h")],
            include_dirs=[INCLUDE_DIR, CSRC],
            library_dirs=[LIB_DIR],
            libraries=["meshccl"],
            extra_compile_args=["-O2", "-g0", "-fvisibility=hidden", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            extra_link_args=["-Wl,-rpath," + LIB_DIR],
        )
    )
    cmdclass["build_ext"] = BuildExtension.with_options(use_ninja=False)

setup(
    name="meshccl",
    version=version(),
    description="meshccl for Python: numpy collectives and a torch.distributed backend",
    license="Apache-2.0",
    packages=["meshccl", "meshccl_torch"],
    ext_modules=ext_modules,
    cmdclass=cmdclass,
    python_requires=">=3.8",
    zip_safe=False,
)
