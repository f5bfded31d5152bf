"""`depthwidth hw`: the hardware table, and a measured profile of the machine at hand.

    depthwidth hw list [--json]
    depthwidth hw measure [--out PATH] [--quick] [--threads N] [--dtypes fp32,bf16] [--json]

`measure` times a large GEMM per dtype, a memory copy and tiny ops with torch
(`depthwidth.machine.measure_profile`, with the per-op cost of our eager block), then the kernel
curves of small GEMMs, attention, GELU and LayerNorm and the cost per dispatched aten op
(`depthwidth.bench.hw.add_small_op_costs`), and saves the profile
where `depthwidth.machine.profile_path` keeps this machine's profile for its thread count, which
`--hardware measured`, `depthwidth bench` and the trainer's MFU read.
"""

from __future__ import annotations

import argparse

from depthwidth.cli import print_json
from depthwidth.cli.common import one_line_errors, positive_int
from depthwidth.errors import UserError
from depthwidth.machine.device import CPU_PROFILE_DTYPES, CUDA_PROFILE_DTYPES


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("hw", help="hardware table and measured profile",
                              description="The hardware table, and a measured profile of this machine.")
    one_line_errors(p)
    sub = p.add_subparsers(dest="hw_command", metavar="{list,measure}")
    lst = sub.add_parser("list", help="the hardware table with sources",
                         description="Peak dense FLOP/s per dtype, memory bandwidth and capacity, links, efficiencies.")
    one_line_errors(lst)
    lst.add_argument("--json", action="store_true", help="print JSON instead of a table")
    lst.set_defaults(run=run_list)
    m = sub.add_parser("measure", help="time GEMMs, a memory copy and tiny ops; save a profile",
                       description="Time a large GEMM per dtype (on CPU through torch.mm and oneDNN), a memory "
                       "copy and the fixed cost of tiny ops with torch, and save the profile as JSON.")
    one_line_errors(m)
    m.add_argument("--out", metavar="PATH",
                   help="profile path (default: this machine's profile for the thread count, in the cache folder)")
    m.add_argument("--quick", action="store_true", help="small sizes, about a second (rougher numbers)")
    m.add_argument("--threads", type=positive_int, help="torch threads (default: torch's current setting)")
    m.add_argument("--dtypes", default=None, metavar="D,D",
                   help=f"dtypes to time, of {','.join(CPU_PROFILE_DTYPES)} on CPU and "
                        f"{','.join(CUDA_PROFILE_DTYPES)} on CUDA (default: those the device runs natively)")
    m.add_argument("--device", type=_device, metavar="DEVICE",
                   help="cpu, cuda, cuda:N or auto (default: cuda when available, else cpu); a GPU's profile is "
                        "kept apart from the CPU's, one per GPU model")
    m.add_argument("--json", action="store_true", help="print the profile as JSON")
    m.add_argument("--collectives", action="store_true",
                   help="instead: time all-reduces between 2 local processes (gloo on CPU, nccl on CUDA) and save "
                        "the link bandwidth and latency the trainer predicts communication time from")
    m.set_defaults(run=run_measure)
    p.set_defaults(run=lambda args: _no_subcommand(p))


def _device(text: str) -> str:
    """cpu, cuda, cuda:N or auto (the settings `depthwidth train --device` takes)."""
    from depthwidth.machine import check_device

    try:
        check_device(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _no_subcommand(parser: argparse.ArgumentParser) -> int:
    raise UserError("say what to do: `depthwidth hw list` or `depthwidth hw measure`")


def run_list(args: argparse.Namespace) -> int:
    from depthwidth.shapes.hardware import HARDWARE

    rows = [h.to_dict() for h in HARDWARE.values()]
    if args.json:
        print_json(rows)
        return 0
    from depthwidth.present.hw import hardware_table
    from depthwidth.present.terminal import console as make_console

    console = make_console()
    console.print(hardware_table(rows))
    for r in rows:
        console.print(f"{r['name']}: {r['source']}", style="dim", highlight=False)
    return 0


def run_measure(args: argparse.Namespace) -> int:
    if args.collectives:
        return _measure_collectives(args)
    from depthwidth.bench.hw import add_small_op_costs, eager_block_overhead
    from depthwidth.machine import capabilities, measure_profile, profile_path, save_profile, torch_threads

    dtypes = tuple(d.strip() for d in args.dtypes.split(",") if d.strip()) if args.dtypes else None
    device = None if args.device in (None, "auto") else args.device
    profile = measure_profile(dtypes=dtypes, threads=args.threads, quick=args.quick, device=device,
                              block_overhead=eager_block_overhead)
    with torch_threads(profile.threads):  # the kernel curves and the per-dispatched-op cost, at its threads
        profile, curve_s = add_small_op_costs(profile, quick=args.quick)
    path = save_profile(profile, args.out or profile_path(threads=args.threads, device=profile.device,
                                                          device_name=profile.device_name))
    data = {**profile.to_dict(), "path": str(path)}
    if args.json:
        print_json(data)
        return 0
    from depthwidth.present.hw import profile_table
    from depthwidth.present.terminal import console as make_console

    console = make_console()
    console.print(profile_table(data))
    caps = capabilities(device or profile.device)
    console.print(caps.describe(), style="dim", highlight=False)
    if dtypes is None and not caps.bf16_native:
        console.print("bf16 not timed: emulated on this device (about 270x slower than fp32 on an AVX2-only "
                      "CPU); --dtypes fp32,bf16 probes it", style="dim", highlight=False)
    for dtype, times in profile.emulated.items():
        console.print(f"{dtype}: emulated here, {times:.0f}x slower than fp32 on the probe GEMM (n=128); not "
                      "timed further", style="dim", highlight=False)
    console.print(f"kernel curves and per-dispatched-op cost ({profile.op_overheads['dispatch_op'] * 1e6:.2f} us) "
                  f"took {curve_s:.1f} s", style="dim", highlight=False)
    console.print(f"saved: {path}", highlight=False)
    return 0


def collective_backend(device: str | None, *, cuda_available: bool) -> str:
    """The torch.distributed backend `hw measure --collectives` times: nccl for cuda and cuda:N (and for
    auto or no --device when CUDA is available), gloo for the CPU."""
    if device in (None, "auto"):
        return "nccl" if cuda_available else "gloo"
    return "nccl" if device.split(":")[0] == "cuda" else "gloo"


def _measure_collectives(args: argparse.Namespace) -> int:
    import torch

    from depthwidth.machine.collective import link_path, measure_link
    from depthwidth.present import units

    backend = collective_backend(args.device, cuda_available=torch.cuda.is_available())
    link = measure_link(backend=backend, ranks=2, quick=args.quick)
    if args.json:
        print_json({**link.to_dict(), "path": str(link_path(backend, 2))})
        return 0
    print(f"{backend}, 2 processes: ring bus bandwidth {units.bandwidth(link.bandwidth)}, latency "
          f"{units.duration(link.latency_s)} per ring step (least squares over {len(link.points)} all-reduce sizes)")
    print(f"saved: {link_path(backend, 2)}")
    return 0
