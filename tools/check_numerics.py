"""Run the lessons under other numeric code paths and compare every output nbval compares: what another CPU prints.

    python tools/check_numerics.py                              # every lesson, the default paths, 2 at a time
    python tools/check_numerics.py notebooks/10_*.ipynb --paths avx2 perturbed

A float32 result differs in its last bits from one CPU to the next: another vector width (AVX-512, AVX2, none),
another BLAS kernel, another thread count adds in another order, and training amplifies those bits. nbval compares
a lesson's outputs with the committed ones as text, so an output that holds such bits passes on the machine that
wrote it and fails on a learner's. This tool executes each lesson (nbclient, in ``notebooks/`` as nbval does) once
per numeric path below and compares the outputs of every cell that nbval compares (every code cell without the tag
``nbval-ignore-output``) with the committed ones, by nbval's own rules (streams merged, images skipped, the
sanitize file applied). It fails, naming the lesson, the cell and the path, when an output differs or a cell raises
(an assertion whose tolerance another path breaks). An output that passes here is one that the machine's code paths
do not change; cells whose outputs must vary are tagged and assert their claim with a tolerance (CONTRIBUTING).

Numeric paths (``--paths``; the default is avx2 and plain, which together change every kernel class measured:
``--probe`` prints which of mm, bmm, softmax, layer_norm, exp, sum and SDPA each one changes here):
  native     nothing changed: what nbval itself runs (a control; it must pass wherever nbval passes)
  avx2       ATen's AVX2 kernels: what a CPU without AVX-512 runs (MKL takes its AVX2 path on AMD CPUs anyway)
  plain      ATen's non-vectorised kernels, MKL's conditional-reproducibility path (another BLAS kernel), one thread
  perturbed  every float32 matrix product and SDPA output moved up or down by one unit in the last place, as
             another BLAS might round it (an IPython startup file in a temporary IPYTHONDIR, see PERTURB_STARTUP);
             slow (the hook sees every operation), so not a default
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbval.plugin import coalesce_streams, get_sanitize_patterns, transform_streams_for_comparison

ROOT = Path(__file__).resolve().parent.parent
SANITIZE_FILE = ROOT / "nbval_sanitize.cfg"

PATHS: dict[str, dict[str, str]] = {
    "native": {},  # this machine's own paths, what nbval runs: a control, and a check of the tool itself
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "plain": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "OMP_NUM_THREADS": "1"},
    "perturbed": {},  # plus the startup file below
}
DEFAULT_PATHS = ("avx2", "plain")

# Runs at kernel start (ipykernel runs $IPYTHONDIR/profile_default/startup/*.py). Which way a result moves is a hash
# of its own bits: the same computation is always moved the same way (a rerun still repeats exactly, two identical
# computations still agree), as on another machine, and no random numbers are drawn (the lesson's seeded draws stay
# what they are). Left alone while the profiler runs: the package's memory meter would count the hook's temporaries,
# and bytes do not depend on rounding. CHECK_NUMERICS_SEED changes the hash, for another sample of roundings;
# CHECK_NUMERICS_ULPS=4 moves results by up to 4 units instead of 1 (a wider test of a printed digit's margin).
PERTURB_STARTUP = '''\
import os

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_aten = torch.ops.aten
_PRODUCTS = {_aten.mm.default, _aten.bmm.default, _aten.addmm.default, _aten.baddbmm.default, _aten.mv.default,
             _aten.dot.default, _aten._scaled_dot_product_flash_attention_for_cpu.default}
_SALT = 2654435761 * (1 + int(os.environ.get("CHECK_NUMERICS_SEED", "0")))
_ULPS = int(os.environ.get("CHECK_NUMERICS_ULPS", "1"))


def _one_ulp(t):
    bits = t.contiguous().view(torch.int32).to(torch.int64)
    step = ((bits * _SALT) % 4294967296 >> 16) % (2 * _ULPS + 1) - _ULPS  # -ULPS ... +ULPS units in the last place
    moved = (bits + step).to(torch.int32).view(torch.float32)  # adjacent bit patterns are adjacent floats
    keep = (t == t.round()) | ~torch.isfinite(t)  # whole numbers (zero too) come out exact on every machine
    return torch.where(keep, t, moved)


class _PerturbProducts(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in _PRODUCTS and not torch.autograd._profiler_enabled():  # the memory meter would count our temporaries
            if isinstance(out, tuple):  # SDPA: (output, logsumexp)
                if out[0].dtype == torch.float32:
                    out = (_one_ulp(out[0]), *out[1:])
            elif out.dtype == torch.float32:
                out = _one_ulp(out)
        return out


_PerturbProducts().__enter__()
'''

# What --probe computes under each path: one small case per kernel class.
PROBE = '''\
import hashlib, torch, torch.nn.functional as F
torch.manual_seed(0)
q, k, v = torch.randn(3, 2, 2, 64, 16).unbind(0)
cases = {"mm": torch.randn(64, 96) @ torch.randn(96, 80), "bmm": torch.randn(8, 16, 33) @ torch.randn(8, 33, 16),
         "softmax": torch.randn(64, 100).softmax(-1), "layer_norm": F.layer_norm(torch.randn(64, 32), (32,)),
         "exp": torch.randn(10000).exp(), "sum": torch.randn(100000).sum(),
         "sdpa": F.scaled_dot_product_attention(q, k, v)}
print(torch.backends.cpu.get_cpu_capability(), torch.get_num_threads())
for name, t in cases.items():
    print(name, hashlib.sha256(t.numpy().tobytes()).hexdigest()[:12])
'''


def describe_path(name: str) -> str:
    if name == "perturbed":
        return "float32 products moved by one unit in the last place"
    return " ".join(f"{key}={value}" for key, value in PATHS[name].items()) or "nothing changed"


def path_env(name: str, startup_dir: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")}
    env.update(PATHS[name])
    if name == "perturbed":
        env["IPYTHONDIR"] = str(startup_dir)
    return env


def write_startup(folder: Path) -> Path:
    startup = folder / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-perturb-products.py").write_text(PERTURB_STARTUP, encoding="utf-8")
    return folder


@dataclass
class Finding:
    notebook: str
    cell_id: str
    code_cell: int  # nbval's "Cell N": the index among code cells
    path: str
    what: str


def compared_text(outputs: list, patterns: list[tuple[str, str]]) -> dict[str, list]:
    """nbval's comparison key: streams merged per name, each output flattened to {field or mime type: [values]},
    the fields nbval skips left out (images, metadata, counts, widget ids), the sanitize rules applied."""
    skip = {"metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
            "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg"}
    flat: dict[str, list] = defaultdict(list)

    def sanitize(value):
        if isinstance(value, str):
            for regex, replace in patterns:
                value = re.sub(regex, replace, value)
        return value

    merged = coalesce_streams([nbformat.from_dict(o) for o in outputs])
    for output in transform_streams_for_comparison(merged):
        for key, value in output.items():
            if key in skip:
                continue
            if key == "data":
                for mime, data in value.items():
                    if mime not in skip:
                        flat[mime].append(sanitize(data))
            else:
                flat[key].append(sanitize(value))
    return dict(flat)


def describe(stored: dict, fresh: dict) -> str:
    def text(flat):
        return "".join(f"[{key}]\n" + "".join(v if isinstance(v, str) else f"{v!r}\n" for v in values)
                       for key, values in sorted(flat.items()))

    lines = difflib.unified_diff(text(stored).splitlines(), text(fresh).splitlines(), "committed", "this path",
                                 lineterm="", n=0)
    return "\n".join(f"    {line}" for line in list(lines)[2:])


def check_notebook(notebook: Path, path: str, startup_dir: Path, keep: Path | None = None
                   ) -> tuple[list[Finding], float]:
    """Execute one lesson under one numeric path; every compared output that differs, every unexpected error."""
    committed = nbformat.read(notebook, as_version=4)
    fresh = nbformat.read(notebook, as_version=4)
    patterns = get_sanitize_patterns(SANITIZE_FILE.read_text(encoding="utf-8"))
    started = time.perf_counter()
    client = NotebookClient(fresh, timeout=600, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(notebook.parent)}})
    client.execute(env=path_env(path, startup_dir), stderr=subprocess.DEVNULL)  # the kernel's own log, not a cell's
    seconds = time.perf_counter() - started
    if keep is not None:
        (keep / path).mkdir(parents=True, exist_ok=True)
        nbformat.write(fresh, keep / path / notebook.name)
    findings = []
    code_cells = [(a, b) for a, b in zip(committed.cells, fresh.cells) if a.cell_type == "code"]
    for index, (stored, ran) in enumerate(code_cells):
        tags = set(stored.metadata.get("tags", []))
        if "nbval-skip" in tags:
            continue
        errors = [o for o in ran.outputs if o.output_type == "error"]
        if errors and "raises-exception" not in tags:
            error = errors[0]
            findings.append(Finding(notebook.name, stored.get("id", "?"), index, path,
                                    f"raised {error.ename}: {error.evalue}"))
            continue
        if "nbval-ignore-output" in tags or stored.execution_count is None:
            continue
        before, after = compared_text(stored.outputs, patterns), compared_text(ran.outputs, patterns)
        if before != after:
            findings.append(Finding(notebook.name, stored.get("id", "?"), index, path,
                                    "output differs:\n" + describe(before, after)))
    return findings, seconds


def probe(paths: list[str], startup_dir: Path) -> None:
    """Which kernel classes each path changes on this machine (a path that changes nothing checks nothing)."""
    def run(env, startup=""):
        lines = subprocess.run([sys.executable, "-c", startup + PROBE], env=env, capture_output=True, text=True,
                               check=True).stdout.splitlines()
        return lines[0], dict(line.split() for line in lines[1:])

    (native_isa, native_hashes) = run(dict(os.environ))
    print(f"this machine: ATen's {native_isa} kernels, {os.cpu_count()} logical cores")
    for name in paths:
        isa, hashes = run(path_env(name, startup_dir), PERTURB_STARTUP if name == "perturbed" else "")
        changed = [case for case, digest in hashes.items() if digest != native_hashes[case]]
        nothing = "nothing (the control)" if name == "native" else "NOTHING: here it checks no other path"
        print(f"  {name:<10} ATen {isa.split()[0]}, {isa.split()[1]} thread(s); changes: "
              f"{', '.join(changed) if changed else nothing}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, default=sorted((ROOT / "notebooks").glob("*.ipynb")))
    parser.add_argument("--paths", nargs="+", choices=list(PATHS), default=list(DEFAULT_PATHS))
    parser.add_argument("--jobs", type=int, default=2, help="lessons executed at the same time (default 2)")
    parser.add_argument("--probe", action="store_true", help="first print what each path changes on this machine")
    parser.add_argument("--keep", type=Path, help="write each executed lesson to KEEP/<path>/ (what it printed)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ipython-perturbed-") as folder:
        startup_dir = write_startup(Path(folder))
        if args.probe:
            probe(args.paths, startup_dir)
        # the longest lessons first, so that the last job to finish is a short one
        jobs = sorted(((nb, p) for nb in args.notebooks for p in args.paths), key=lambda job: -job[0].stat().st_size)
        findings: list[Finding] = []
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(check_notebook, nb.resolve(), p, startup_dir, args.keep): (nb, p) for nb, p in jobs}
            for future, (nb, p) in futures.items():
                found, seconds = future.result()
                findings += found
                print(f"{nb.name} [{p}]: {'OK' if not found else f'{len(found)} cell(s) differ'} ({seconds:.0f} s)",
                      flush=True)
    for f in sorted(findings, key=lambda f: (f.notebook, f.code_cell, f.path)):
        print(f"\n{f.notebook}, cell {f.cell_id} (nbval's Cell {f.code_cell}), numeric path {f.path} "
              f"({describe_path(f.path)}): {f.what}")
    changed = {(f.notebook, f.cell_id) for f in findings if f.what.startswith("output differs")}
    raised = {(f.notebook, f.cell_id) for f in findings} - changed
    summary = (f"{len(changed)} cell(s) changed a compared output, {len(raised)} cell(s) raised" if findings else
               "every compared output is the same, no cell raised")
    print(f"\ncheck_numerics: {summary}: {len(args.notebooks)} lesson(s) x {len(args.paths)} numeric path(s) "
          f"({', '.join(args.paths)}) in {time.perf_counter() - started:.0f} s")
    if changed:
        print("An output that another CPU computes differently cannot be compared as text: tag the cell "
              "nbval-ignore-output and assert its claim with a stated tolerance (CONTRIBUTING.md, nbval rules).")
    if raised:
        print("A cell that raises under another numeric path asserts more than every machine computes: derive its "
              "tolerance from the spread over these paths (CONTRIBUTING.md, nbval rules).")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
