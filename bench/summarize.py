#!/usr/bin/python3
"""Turns the raw outputs of bench/run_all.sh into the markdown tables of bench/RESULTS.md.

MAINTAINER-ONLY SCRIPT (standard library only; the product has no Python).

    python3 bench/summarize.py RESULTS_DIR > summary.md

RESULTS_DIR holds what run_all.sh wrote:
  peak_<i>.json                 bench_peak --json, several times during the run
  kernels_<config>.json         bench_kernels (Google Benchmark JSON, aggregates only)
  train_<config>_<round>.json   bench_train (idem)
  pytorch_<config>_<round>.json bench/reference/pytorch_train_step.py --json
Rules: every number printed is a median of measured values, never an estimate.
  - peak: the denominator of "% of peak" is the BEST trial over all bench_peak runs for that thread
    count (a peak is an upper bound; kernel medians measured under load are compared against it, so the
    percentages are conservative). The median of the per-run medians is printed beside it.
  - kernels: Google Benchmark's median over repetitions.
  - train: per round, the median over repetitions (Bastion) or passes (PyTorch); the table shows the
    median over rounds, and the ratio is the median over rounds of the per-round ratio (A/B interleaved).
    GFLOP/step is what autograd/flops.h counted (linear and conv2d, forward and backward); "% of peak"
    divides the median GFLOP/s by the best bench_peak figure at the same thread count.
"""
import glob
import json
import os
import re
import statistics
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def gbench_medians(path):
    """run_name -> dict of counters and real_time (ns) of the median aggregate."""
    out = {}
    for b in load(path)["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"]
        if name.endswith("/real_time"):
            name = name[: -len("/real_time")]
        unit = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
        entry = {k: v for k, v in b.items() if isinstance(v, (int, float))}
        entry["real_time_ns"] = b["real_time"] * unit
        out[name] = entry
    return out


LAYER_ORDER = ["square64", "square256", "square1024", "lenet28.conv1", "lenet28.conv2", "lenet32.conv1",
               "lenet32.conv2", "fedcap.conv1", "fedcap.conv2", "resnet18.layer1", "lenet28.pool1"]
PART_ORDER = ["", "fwd", "bwd_weight", "bwd_input"]
KERNEL_ORDER = ["conv_im2col", "conv_col2im", "conv_col2im_v1", "conv_col2im_v2", "max_pool2d_forward", "max_pool2d_backward",
                "max_pool2d_backward_v1"]
MODEL_ORDER = ["mlp/1x28x28", "lenet/1x28x28", "lenet/3x32x32", "cnn-fedcap/3x32x32"]


def index_or_end(items, x):
    return items.index(x) if x in items else len(items)


def shape_key(shape):
    """'lenet28.conv2.bwd_input' -> sort key following the order of bench_kernels.cpp."""
    for layer in sorted(LAYER_ORDER, key=len, reverse=True):
        if shape == layer or shape.startswith(layer + "."):
            return (LAYER_ORDER.index(layer), index_or_end(PART_ORDER, shape[len(layer) + 1:]), shape)
    return (len(LAYER_ORDER), 0, shape)


def fmt(x, digits=1):
    return "—" if x is None else ("%.*f" % (digits, x))


def pct(a, b):
    return None if a is None or b is None or b == 0 else 100.0 * a / b


def peak_table(results_dir):
    runs = [load(p)["peak"] for p in sorted(glob.glob(os.path.join(results_dir, "peak_*.json")))]
    if not runs:
        return {}, "no bench_peak output\n"
    peaks = {}
    lines = ["| ISA | threads | best GFLOP/s (denominator) | median of run medians | per-run medians |",
             "|---|---|---|---|---|"]
    for isa in ("avx512", "avx2"):
        for threads in (1, 2):
            rows = [r for run in runs for r in run if r["isa"] == isa and r["threads"] == threads]
            best = max(r["best_gflops"] for r in rows)
            med = statistics.median(r["median_gflops"] for r in rows)
            if isa == "avx512":
                peaks[threads] = best
            lines.append("| %s | %d | %.1f | %.1f | %s |" % (isa, threads, best, med,
                                                            ", ".join("%.1f" % r["median_gflops"] for r in rows)))
    return peaks, "\n".join(lines) + "\n"


def kernel_tables(results_dir, config, peaks):
    path = os.path.join(results_dir, "kernels_%s.json" % config)
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return ""
    m = gbench_medians(path)

    def g(kind, shape, threads, counter="GFLOPS"):
        e = m.get("%s/%s/threads:%d" % (kind, shape, threads))
        return None if e is None else e[counter] / 1e9

    out = []
    # ---- GEMM ----
    shapes = []
    for name in m:
        mo = re.match(r"gemm_openblas/([^/]+)/threads:1$", name)
        if mo:
            shapes.append(mo.group(1))
    shapes.sort(key=shape_key)
    out.append("GEMM (C = A @ B, float32; GFLOP/s = 2MNK / wall time). OpenBLAS = gemm_openblas_cpu with OpenBLAS's own"
               " threads (rung 0); gemm_cpu = Bastion's path (panels over OpenMP, OpenBLAS single-threaded inside);"
               " blocked = the fallback, single-threaded by contract\n")
    out.append("| shape | M | N | K | OpenBLAS 1T | % peak 1T | OpenBLAS 2T | % peak 2T | gemm_cpu 1T | gemm_cpu 2T | % peak 2T | blocked 1T | blocked % of OpenBLAS 1T |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in shapes:
        e = m["gemm_openblas/%s/threads:1" % s]
        o1, o2, b1 = g("gemm_openblas", s, 1), g("gemm_openblas", s, 2), g("gemm_blocked", s, 1)
        c1, c2 = g("gemm_cpu", s, 1), g("gemm_cpu", s, 2)
        out.append("| %s | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            s, e["M"], e["N"], e["K"], fmt(o1), fmt(pct(o1, peaks.get(1))), fmt(o2), fmt(pct(o2, peaks.get(2))),
            fmt(c1), fmt(c2), fmt(pct(c2, peaks.get(2))), fmt(b1), fmt(pct(b1, o1), 0)))
    # ---- conv ----
    layers = []
    for name in m:
        mo = re.match(r"conv_forward/([^/]+)/threads:1$", name)
        if mo:
            layers.append(mo.group(1))
    layers.sort(key=shape_key)
    out.append("\nconv2d (fwd GFLOP/s = 2*N*K*C*R*S*OH*OW / wall time; bwd counts 2x that with grad_in, 1x without;"
               " '% sgemm' = conv rate / gemm_cpu rate on the layer's own per-chunk GEMM(s) at the same threads)\n")
    out.append("| layer | T | fwd GFLOP/s | fwd % peak | fwd % sgemm | bwd GFLOP/s | bwd % peak | bwd % sgemm | fwd ms | bwd ms |"
               " bwd ms, columns kept |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for layer in layers:
        for t in (1, 2):
            f, b = g("conv_forward", layer, t), g("conv_backward", layer, t)
            gf = g("gemm_cpu", layer + ".fwd", t)
            # The backward's GEMM rate: total flops of its GEMMs over the sum of their times.
            parts = [(layer + ".bwd_weight"), (layer + ".bwd_input")]
            flops = time = 0.0
            for p in parts:
                e = m.get("gemm_cpu/%s/threads:%d" % (p, t))
                if e is not None:
                    f_ = 2.0 * e["M"] * e["N"] * e["K"]
                    flops += f_
                    time += f_ / e["GFLOPS"]
            gb = flops / time / 1e9 if time else None
            fe = m.get("conv_forward/%s/threads:%d" % (layer, t))
            be = m.get("conv_backward/%s/threads:%d" % (layer, t))
            ke = m.get("conv_backward_kept/%s/threads:%d" % (layer, t))
            out.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                layer, t, fmt(f), fmt(pct(f, peaks.get(t))), fmt(pct(f, gf), 0), fmt(b), fmt(pct(b, peaks.get(t))),
                fmt(pct(b, gb), 0), fmt(fe and fe["real_time_ns"] / 1e6, 3), fmt(be and be["real_time_ns"] / 1e6, 3),
                fmt(ke and ke["real_time_ns"] / 1e6, 3)))
    # ---- memory-bound building blocks ----
    out.append("\nMemory-bound kernels (GB/s = bytes read + written once / wall time; a lower bound on traffic)\n")
    out.append("| kernel | shape | T | GB/s | µs |")
    out.append("|---|---|---|---|---|")
    rows = []
    for name, e in m.items():
        if "GBps" in e:
            mo = re.match(r"([^/]+)/([^/]+)/threads:(\d)$", name)
            rows.append(((index_or_end(KERNEL_ORDER, mo.group(1)), shape_key(mo.group(2)), mo.group(3)), mo, e))
    for _, mo, e in sorted(rows, key=lambda r: r[0]):
        if True:
            out.append("| %s | %s | %s | %s | %s |" % (mo.group(1), mo.group(2), mo.group(3), fmt(e["GBps"] / 1e9, 2),
                                                    fmt(e["real_time_ns"] / 1e3, 0)))
    # ---- candidate variants vs the library kernel ----
    variants = []
    for name, e in m.items():
        mo = re.match(r"([^/]+)_v(\d+)/([^/]+)/threads:(\d)$", name)
        if mo:
            base = m.get("%s/%s/threads:%s" % (mo.group(1), mo.group(3), mo.group(4)))
            if base:
                variants.append(((mo.group(1), int(mo.group(2)), shape_key(mo.group(3)), mo.group(4)), mo, e, base))
    if variants:
        out.append("\nCandidate variants (bench_kernels.cpp, checked bitwise against the library kernel first)\n")
        out.append("| kernel | variant | shape | T | library µs | variant µs | speed-up |")
        out.append("|---|---|---|---|---|---|---|")
        for _, mo, e, base in sorted(variants, key=lambda v: v[0]):
            out.append("| %s | v%s | %s | %s | %s | %s | %s |" % (
                mo.group(1), mo.group(2), mo.group(3), mo.group(4), fmt(base["real_time_ns"] / 1e3, 0),
                fmt(e["real_time_ns"] / 1e3, 0), fmt(base["real_time_ns"] / e["real_time_ns"], 2)))
    return "\n".join(out) + "\n"


def train_tables(results_dir, config, peaks):
    bastion_files = sorted(glob.glob(os.path.join(results_dir, "train_%s_*.json" % config)))
    torch_files = sorted(glob.glob(os.path.join(results_dir, "pytorch_%s_*.json" % config)))
    if not bastion_files:
        return ""
    rounds_b = [gbench_medians(p) for p in bastion_files]
    rounds_t = [{r["case"]: r["median"] for r in load(p)["results"]} for p in torch_files]
    cases = sorted((n[len("train_step/"):] for n in rounds_b[0]),
                   key=lambda c: (index_or_end(MODEL_ORDER, c.rsplit("/", 1)[0]), c))
    out = ["| model | input | threads | Bastion samples/s | PyTorch samples/s | Bastion / PyTorch | GFLOP/step | Bastion GFLOP/s | % of peak | Bastion per round | PyTorch per round |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    detail = ["| model | input | threads | forward ms | backward ms | zero_grad+SGD ms | fresh allocs/step | final loss |",
              "|---|---|---|---|---|---|---|---|"]
    for case in cases:
        model, shape, threads = case.split("/")
        b = [r["train_step/" + case]["samples_per_s"] for r in rounds_b if "train_step/" + case in r]
        t = [r[case] for r in rounds_t if case in r]
        ratios = [x / y for x, y in zip(b, t)]
        # Older result files have no flop counters (before autograd/flops.h): those columns print "—".
        flops = [r["train_step/" + case].get("gflop_per_step") for r in rounds_b if "train_step/" + case in r]
        rates = [r["train_step/" + case].get("gflop_per_s") for r in rounds_b if "train_step/" + case in r]
        flop = statistics.median(flops) if None not in flops else None
        rate = statistics.median(rates) if None not in rates else None
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            model, shape, threads.split(":")[1], fmt(statistics.median(b), 0), fmt(t and statistics.median(t), 0),
            fmt(ratios and statistics.median(ratios), 2), fmt(flop, 3), fmt(rate, 1),
            fmt(pct(rate, peaks.get(int(threads.split(":")[1]))), 0), ", ".join("%.0f" % x for x in b),
            ", ".join("%.0f" % x for x in t)))
        es = [r["train_step/" + case] for r in rounds_b if "train_step/" + case in r]
        med = lambda k: statistics.median(e[k] for e in es)
        detail.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            model, shape, threads.split(":")[1], fmt(med("forward_ms"), 2), fmt(med("backward_ms"), 2),
            fmt(med("step_ms"), 3), fmt(max(e["fresh_allocs_per_step"] for e in es), 3), fmt(med("final_loss"), 3)))
    return ("%d rounds, Bastion and PyTorch alternated within each round\n\n" % len(rounds_b) + "\n".join(out) +
            "\n\nWhere a Bastion step goes (medians; manual timers inside the step)\n\n" + "\n".join(detail) + "\n")


def main():
    results_dir = sys.argv[1]
    configs = []
    for p in glob.glob(os.path.join(results_dir, "*_*.json")):
        mo = re.match(r"(kernels|train|pytorch)_([a-z0-9-]+?)(_\d+)?\.json$", os.path.basename(p))
        if mo and mo.group(2) not in configs:
            configs.append(mo.group(2))
    order = ["default", "skx", "skx-passive", "passive", "prescott"]
    configs.sort(key=lambda c: order.index(c) if c in order else len(order))
    peaks, text = peak_table(results_dir)
    print("## FP32 FMA peak (bench_peak)\n")
    print(text)
    env_path = os.path.join(results_dir, "configs.txt")
    if os.path.exists(env_path):
        print("## Configurations (environment of both Bastion and PyTorch)\n")
        print(open(env_path).read())
    for config in configs:
        k = kernel_tables(results_dir, config, peaks)
        if k:
            print("## Kernels, config `%s`\n" % config)
            print(k)
    for config in configs:
        t = train_tables(results_dir, config, peaks)
        if t:
            print("## Training step, batch 64, config `%s`\n" % config)
            print(t)


if __name__ == "__main__":
    main()
