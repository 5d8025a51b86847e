"""Regenerate (or check) the Python code generated from proto/arena/v1/*.proto.

Usage:
    python scripts/gen_proto.py          # rewrite the generated files
    python scripts/gen_proto.py --check  # fail if the committed files are stale

The generated modules (``*_pb2.py``, ``*_pb2_grpc.py``) and their type stubs
(``*.pyi``, written by mypy-protobuf) live beside the .proto files and are
committed, so installing Arena never needs protoc.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
PACKAGE_DIR = PROTO_ROOT / "arena" / "v1"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")


def _plugin(name: str) -> str:
    found = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(found).exists():
        sys.exit(f"gen_proto: the protoc plugin {name} is missing; run `pip install mypy-protobuf`")
    return found


def generate(out_dir: Path) -> None:
    """Run protoc over every .proto under proto/arena/v1 into ``out_dir``."""
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in PACKAGE_DIR.glob("*.proto"))
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--plugin=protoc-gen-mypy={_plugin('protoc-gen-mypy')}",
        f"--plugin=protoc-gen-mypy_grpc={_plugin('protoc-gen-mypy_grpc')}",
        f"--mypy_out={out_dir}",
        f"--mypy_grpc_out={out_dir}",
        *protos,
    ]
    result = subprocess.run(cmd, cwd=PROTO_ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"gen_proto: protoc failed:\n{result.stderr}")


def generated_files(root: Path) -> list[Path]:
    base = root / "arena" / "v1"
    return sorted(p for p in base.iterdir() if p.name.endswith(GENERATED_SUFFIXES))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the committed code is current")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_root = Path(tmp)
        generate(tmp_root)
        fresh = {p.name: p for p in generated_files(tmp_root)}
        if args.check:
            current = {p.name: p for p in generated_files(PROTO_ROOT)}
            stale = sorted(
                name
                for name in fresh.keys() | current.keys()
                if name not in fresh
                or name not in current
                or not filecmp.cmp(fresh[name], current[name], shallow=False)
            )
            if stale:
                print(
                    "generated proto code is stale: " + ", ".join(stale) + "; run `make proto`",
                    file=sys.stderr,
                )
                return 1
            print(f"generated proto code is current ({len(fresh)} files)")
            return 0
        for old in generated_files(PROTO_ROOT):
            old.unlink()
        for name, path in fresh.items():
            shutil.copyfile(path, PACKAGE_DIR / name)
        print(f"wrote {len(fresh)} generated files to {PACKAGE_DIR.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
