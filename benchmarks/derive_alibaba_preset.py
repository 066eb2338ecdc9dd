"""Derive the compact ``alibaba-v2023`` preset from the raw cluster-trace-gpu-v2023 files.

    python benchmarks/derive_alibaba_preset.py [TRACE_DIR] [--out envs/traces/presets/alibaba-v2023.json]

TRACE_DIR holds ``openb_node_list_all_node.csv`` and ``openb_pod_list_gpuspec33.csv`` (the pod list in
which about a third of GPU pods carry a GPU-model constraint, so types have real service locality).
Default: ../shared/traces/alibaba-gpu-v2023 relative to the repository root.
"""

from __future__ import annotations

import argparse
import json
import os

from clustergym.envs.traces.alibaba import derive_preset, load_nodes, load_pods

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace_dir", nargs="?", default=os.path.join(ROOT, "..", "..", "shared", "traces", "alibaba-gpu-v2023"))
    ap.add_argument("--out", default=os.path.join(ROOT, "envs", "traces", "presets", "alibaba-v2023.json"))
    ap.add_argument("--num-types", type=int, default=10)
    ap.add_argument("--slot-seconds", type=float, default=3600.0)
    args = ap.parse_args(argv)
    nodes = load_nodes(os.path.join(args.trace_dir, "openb_node_list_all_node.csv"))
    pods = load_pods(os.path.join(args.trace_dir, "openb_pod_list_gpuspec33.csv"))
    preset = derive_preset(nodes, pods, num_types=args.num_types, slot_seconds=args.slot_seconds)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(preset, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}: {len(preset['nodes'])} node configurations ({len(nodes)} nodes), "
          f"{len(preset['job_types'])} job types from {len(pods)} pods")
    for t in preset["job_types"]:
        print(f"  {t['pods']:5d} pods  cpu {t['cpu']:6.2f}  mem {t['mem_gib']:6.1f} GiB  gpu {t['gpu']:5.2f}  "
              f"models {'|'.join(t['gpu_models']) or 'any'}  rho {t['rho']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
