"""`depthwidth export`: a trained run as a Hugging Face model folder that `transformers` loads unchanged
(config.json, model.safetensors, tokenizer.json), or the probe tasks as lm-evaluation-harness tasks.

    depthwidth export runs/a -o hf/a                  # then AutoModelForCausalLM.from_pretrained("hf/a")
    depthwidth export --probe-tasks multihop probe:recall:2,4 -o tasks   # lm_eval --include_path tasks ...
    depthwidth study export studies/demo --best -o hf/best      # a study's recommended shape

A shape no Hugging Face class holds exactly is refused with one line naming the option (exit 2).
"""

from __future__ import annotations

import argparse

from depthwidth.cli import print_json
from depthwidth.cli.common import one_line_errors
from depthwidth.errors import UserError

HELP = "write a trained run as a Hugging Face (transformers) model folder, or the probes as lm_eval tasks"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("export", help=HELP, description=HELP + ".", epilog=__doc__.split("\n\n", 1)[1],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    one_line_errors(p)
    p.add_argument("run_dir", metavar="RUN_DIR", nargs="?",
                   help="a run folder of depthwidth train --out (or its checkpoint.pt)")
    p.add_argument("-o", "--out", metavar="DIR", required=True, help="the folder to write")
    p.add_argument("--probe-tasks", metavar="SPEC", nargs="+",
                   help="write these probes (multihop, recall, facts, addition, parity or probe:NAME:...) as "
                        "lm-evaluation-harness task configs instead of a model")
    p.add_argument("--drop-layers", metavar="I,J", type=_layer_list, default=(),
                   help="leave these blocks (0-based, comma-separated) out of the exported model")
    p.add_argument("--force", action="store_true", help="replace the model files in a non-empty folder")
    p.add_argument("--json", action="store_true", help="print what was written as one JSON object")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if bool(args.run_dir) == bool(args.probe_tasks):
        raise UserError("give RUN_DIR (a model to export) or --probe-tasks SPEC ... (harness tasks), one of them")
    if args.probe_tasks and args.drop_layers:
        raise UserError("--drop-layers applies to a model export, not to --probe-tasks")
    if args.probe_tasks:
        from depthwidth.files import staged_folder
        from depthwidth.hf.harness import write_harness_tasks

        with staged_folder(args.out, what="the tasks") as tmp:  # a full disk: one line, nothing left
            names = write_harness_tasks(args.probe_tasks, tmp, final_dir=args.out)
        if args.json:
            print_json({"out_dir": args.out, "tasks": names})
        else:
            print(f"wrote {len(names)} lm_eval task(s) to {args.out}: {', '.join(names)}\n"
                  f"run: lm_eval --model hf --model_args pretrained=MODEL_DIR,dtype=float32,prefix_token_id=N "
                  f"--include_path {args.out} --tasks {','.join(names)}\n"
                  "(N: the model's token for a newline, 10 with the byte tokenizer; the harness needs a prefix token)")
        return 0
    from depthwidth.artifact.folder import checkpoint_file

    checkpoint_file(args.run_dir)  # a pipe, a device or a missing file: one line before torch is imported
    from depthwidth.hf.export import export_run

    result = export_run(args.run_dir, args.out, overwrite=args.force, drop_layers=args.drop_layers)
    if args.json:
        print_json(result.to_dict())
    else:
        print(export_line(result))
    return 0


def _layer_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of layer numbers, e.g. 5,6") from None


def export_line(result) -> str:
    """What an export wrote, in one line (and the lm_eval command of its probe tasks, if any); shared
    with `study export`."""
    from depthwidth.present.units import count

    held = f"; {result.zero_biases} bias values the class has are zero" if result.zero_biases else ""
    unfinished = "" if result.finished else f" (unfinished run: step {result.step})"
    line = (f"{result.shape.label()} -> {result.out_dir}: {result.class_name}, {count(result.hf_params)} parameters, "
            f"tokenizer {result.tokenizer}{held}{unfinished}")
    if result.tasks:
        line += (f"\n  lm_eval --model hf --model_args {result.lm_eval_args()} "
                 f"--include_path {result.out_dir}/lm_eval_tasks --tasks {','.join(result.tasks)}")
    return line
