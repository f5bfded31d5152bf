"""Runs of one 2-process group for test_distributed.py: started with RANK/WORLD_SIZE set, as torchrun
starts a script. argv: the JSON file of the jobs, the folder for the results. Each job is a
`train(shape, config, out_dir, resume)` call; rank 0 writes its result."""

import json
import sys
from pathlib import Path

from depthwidth.shapes import Shape
from depthwidth.train import TrainConfig, train


def main(jobs_file: str, out: str) -> None:
    import os

    for job in json.loads(Path(jobs_file).read_text()):
        result = train(Shape.from_dict(job["shape"]), TrainConfig.from_dict(job["config"]),
                       out_dir=job.get("out_dir"), resume=job.get("resume", False))
        if os.environ["RANK"] == "0":
            Path(out, job["name"] + ".json").write_text(json.dumps(result.to_dict()))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
