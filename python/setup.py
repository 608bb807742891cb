"""Builds the autoaccel package with its gRPC stubs.

The stubs (autoaccel/_proto/autoaccel_pb2*.py) are generated from the
repository's proto/autoaccel.proto by grpcio-tools when the package is built
(`pip install ./python`, `pip install -e python`), never checked in. The proto
is read from ../proto (a checkout) or ./proto (an sdist, which carries a
copy); it is compiled as autoaccel/_proto/autoaccel.proto so that the
generated modules import each other as `autoaccel._proto.*`.
"""

import hashlib
import os
import shutil
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_NAME = "autoaccel.proto"
# A checkout's proto, then an sdist's copy.
PROTO_CANDIDATES = [os.path.join(HERE, "..", "proto", PROTO_NAME),
                    os.path.join(HERE, "proto", PROTO_NAME)]


def find_proto():
    for path in PROTO_CANDIDATES:
        if os.path.isfile(path):
            return os.path.abspath(path)
    raise SystemExit(
        "autoaccel: cannot find %s (looked at %s); build the package from the autoaccel "
        "repository's python/ folder (pip install ./python) or from its sdist"
        % (PROTO_NAME, ", ".join(os.path.normpath(p) for p in PROTO_CANDIDATES)))


def generate_stubs(out_dir):
    """Writes autoaccel/_proto/{__init__,autoaccel_pb2,autoaccel_pb2_grpc}.py
    (and the .pyi) under `out_dir`, the folder that holds the autoaccel package."""
    try:
        from grpc_tools import protoc
    except ImportError:
        raise SystemExit("autoaccel: building needs grpcio-tools (pyproject.toml's build "
                         "requirements; pip installs them unless --no-build-isolation)")
    proto = find_proto()
    with open(proto, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    package_dir = os.path.join(out_dir, "autoaccel", "_proto")
    os.makedirs(package_dir, exist_ok=True)
    include = tempfile.mkdtemp(prefix="autoaccel-proto-")
    try:
        os.makedirs(os.path.join(include, "autoaccel", "_proto"))
        shutil.copyfile(proto, os.path.join(include, "autoaccel", "_proto", PROTO_NAME))
        well_known = os.path.join(os.path.dirname(protoc.__file__), "_proto")
        code = protoc.main([
            "grpc_tools.protoc", "-I" + include, "-I" + well_known,
            "--python_out=" + out_dir, "--pyi_out=" + out_dir, "--grpc_python_out=" + out_dir,
            os.path.join(include, "autoaccel", "_proto", PROTO_NAME)])
    finally:
        shutil.rmtree(include, ignore_errors=True)
    if code != 0:
        raise SystemExit("autoaccel: protoc failed on %s (exit %d)" % (proto, code))
    with open(os.path.join(package_dir, "__init__.py"), "w", encoding="utf-8") as f:
        f.write('"""gRPC stubs generated from proto/autoaccel.proto when the package '
                'was built."""\n\n'
                '# sha256 of the proto the stubs were generated from.\n'
                'PROTO_SHA256 = %r\n' % digest)


class BuildPyWithStubs(build_py):
    """build_py, then the stubs: into the build folder, or into the source
    tree for an editable install (which imports from there)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            generate_stubs(HERE)
        else:
            generate_stubs(self.build_lib)

    def get_outputs(self, include_bytecode=True):
        outputs = super().get_outputs(include_bytecode)
        if not getattr(self, "editable_mode", False):
            package_dir = os.path.join(self.build_lib, "autoaccel", "_proto")
            outputs += [os.path.join(package_dir, name) for name in
                        ("__init__.py", "autoaccel_pb2.py", "autoaccel_pb2.pyi",
                         "autoaccel_pb2_grpc.py")]
        return outputs


class SdistWithProto(sdist):
    """An sdist carries proto/autoaccel.proto, so that it builds on its own."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        os.makedirs(os.path.join(base_dir, "proto"), exist_ok=True)
        shutil.copyfile(find_proto(), os.path.join(base_dir, "proto", PROTO_NAME))


setup(cmdclass={"build_py": BuildPyWithStubs, "sdist": SdistWithProto})
