"""The Ray executor (the `ray` extra, imported only here): each run is a Ray task.

- `address` joins an existing cluster (`ray.init(address=...)`); without it a local cluster is started
  for the study, with no dashboard and its temp folder `<study>/ray` (Unix socket paths are limited to
  about 107 bytes and Ray puts `session_<date>_<pid>/sockets/plasma_store` under it, so a study folder
  whose path is too long gets a short folder under the system temp dir instead; `describe()` says which).
- Each task asks for `cpus_per_run` CPUs and `gpus_per_run` GPUs per process of its run (a run with
  `nproc_per_run` = N asks for N times both, in one task: Ray grants a task all of its resources on one
  node at once, the reservation a one-bundle STRICT_PACK placement group would make; the task then starts
  the run's N processes itself, `depthwidth.train.launch`, so the trainer stays a plain torch.distributed
  program - Ray Train's TorchTrainer would run it inside Ray Train workers with its own process-group
  setup, checkpoints and reporting). `gpus_per_run` defaults to 1 on a cluster with GPUs, else 0.
- One run per Ray worker process (`max_calls=1`): a run never inherits another's CUDA context or
  `CUDA_VISIBLE_DEVICES`; the device is explicit - Ray makes the task's GPUs visible, and a task with
  no GPU sees none (`CUDA_VISIBLE_DEVICES=""`), so `device = "auto"` trains on the CPU there.
  Ray's own retries are off
  (max_retries=0): a task that raises or whose worker dies comes back as a `failed` Outcome and the
  study's driver decides whether to retry it. Workers return outcomes; only the driver writes the store.
- Checkpoints go to the run's folder under the study folder: on a multi-node cluster that path must be
  a shared filesystem for a retried run to resume (otherwise it restarts from step 0, same numbers).
- An `address` is checked before anything is written (`check_address`): its host must resolve and its
  port accept a connection, then a throwaway process must join the cluster, all within
  `DEPTHWIDTH_RAY_TIMEOUT` seconds (default 30); Ray itself would retry an address that does not
  answer for minutes, printing its reconnect lines.
- Out of scope: runs whose processes span several nodes.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from depthwidth.errors import UserError
from depthwidth.machine.paths import env_seconds
from depthwidth.study.executors.base import JobFunction
from depthwidth.study.jobs import Job, Outcome, execute, worker_name

#: longest temp dir we hand to Ray: AF_UNIX paths are <= 107 bytes and Ray appends about 66
MAX_TEMP_DIR_CHARS = 40
LOCAL_OBJECT_STORE_BYTES = 256 * 1024**2
TIMEOUT_ENV = "DEPTHWIDTH_RAY_TIMEOUT"
DEFAULT_TIMEOUT_S = 30.0
#: what the throwaway process runs to join the cluster at argv[1] and leave again
_JOIN = ("import sys, ray; ray.init(address=sys.argv[1], log_to_driver=False, configure_logging=False, "
         "logging_level='ERROR'); ray.shutdown()")


def import_ray():
    try:
        import ray
    except ImportError:
        raise UserError("the ray executor needs the ray extra: pip install 'depthwidth[ray]' "
                         "(or use --executor local)") from None
    return ray


def ray_temp_dir(study_dir: str | os.PathLike | None) -> tuple[str, str | None]:
    """(temp dir for a local Ray cluster, a note when it is not inside the study folder)."""
    if study_dir is not None:
        wanted = os.path.abspath(os.path.join(study_dir, "ray"))
        if len(wanted) <= MAX_TEMP_DIR_CHARS:
            Path(wanted).mkdir(parents=True, exist_ok=True)
            return wanted, None
        short = tempfile.mkdtemp(prefix="dwray-")
        return short, (f"study path is too long for Ray's Unix sockets ({len(wanted)} > {MAX_TEMP_DIR_CHARS} "
                       f"characters); Ray's temp folder is {short}")
    return tempfile.mkdtemp(prefix="dwray-"), None


def connect_timeout() -> float:
    """Seconds a Ray address may take to answer: $DEPTHWIDTH_RAY_TIMEOUT, default 30."""
    return env_seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT_S, most=86400)


def check_address(address: str, *, timeout: float | None = None) -> None:
    """Refuse a Ray address that cannot answer within `timeout` seconds (default `connect_timeout()`):
    a host that does not resolve, a port nobody listens on, or a listener that is not a Ray cluster."""
    timeout = connect_timeout() if timeout is None else timeout
    target = address.removeprefix("ray://")
    if target not in ("auto", "local"):
        host, sep, port = target.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UserError(f"--address {address!r}: expected HOST:PORT (such as 10.0.0.1:6379), "
                            "ray://HOST:PORT or auto")
        _probe_port(address, host.strip("[]"), int(port), timeout=timeout)
    try:
        proc = subprocess.run([sys.executable, "-c", _JOIN, address], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise UserError(f"--address {address}: no Ray cluster answered within {timeout:g} s (set "
                        f"{TIMEOUT_ENV} to wait longer)") from None
    if proc.returncode:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        raise UserError(f"--address {address}: joining the Ray cluster failed ({lines[-1][:200] if lines else ''})")


def _probe_port(address: str, host: str, port: int, *, timeout: float) -> None:
    """Resolve `host` and open a TCP connection to `port`, in a thread bounded by `timeout` (a name
    lookup has no timeout of its own)."""
    outcome: list[str] = []

    def probe() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            outcome.append("")
        except socket.gaierror as exc:
            outcome.append(f"host {host!r} does not resolve ({exc.strerror})")
        except OSError as exc:
            outcome.append(f"nothing answers at {host}:{port} ({exc.strerror or exc})")

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    why = outcome[0] if outcome else f"no answer within {timeout:g} s"
    if why:
        raise UserError(f"--address {address}: {why}")


def _run_job(job_fn: JobFunction, job: Job, gpus: float = 0) -> Outcome:
    if not gpus:  # a task without GPUs sees none, so device "auto" is the CPU (Ray sets the GPUs it grants)
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    return job_fn(job)


def remote_task(ray):
    """The Ray remote function of a job: no retries by Ray (the driver decides), one run per worker process."""
    return ray.remote(max_retries=0, max_calls=1)(_run_job)


def run_resources(job: Job, *, cpus_per_run: float, gpus_per_run: float) -> dict[str, float]:
    """Ray resources of one job's task: per process of the run, times its `nproc`."""
    n = int((job.execution or {}).get("nproc", 1)) if job.kind == "train" else 1
    return {"num_cpus": cpus_per_run * n, "num_gpus": gpus_per_run * n}


class RayExecutor:
    name = "ray"

    def __init__(self, *, address: str | None = None, study_dir: str | os.PathLike | None = None,
                 cpus_per_run: float = 1, gpus_per_run: float | None = None,
                 job_fn: JobFunction = execute) -> None:
        self.address = address
        self.study_dir = study_dir
        self.cpus_per_run = cpus_per_run
        self.gpus_per_run = gpus_per_run
        self._job_fn = job_fn
        self._refs: dict = {}
        self._owns_ray = False
        self._remote = None
        self.note: str | None = None
        self.temp_dir: str | None = None
        self.capacity = 1  # tasks in flight at once (set from the cluster's resources in start())

    def start(self) -> None:
        ray = import_ray()
        if not ray.is_initialized():
            if self.address:
                ray.init(address=self.address, log_to_driver=False, configure_logging=False)
            else:
                self.temp_dir, self.note = ray_temp_dir(self.study_dir)
                ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, _temp_dir=self.temp_dir,
                         object_store_memory=LOCAL_OBJECT_STORE_BYTES, log_to_driver=False,
                         configure_logging=False)
            self._owns_ray = True
        resources = ray.cluster_resources()
        if self.gpus_per_run is None:  # a cluster with GPUs trains on them: one per process of a run
            self.gpus_per_run = 1.0 if resources.get("GPU", 0) > 0 else 0.0
        for key, wanted in (("CPU", self.cpus_per_run), ("GPU", self.gpus_per_run)):
            if wanted and resources.get(key, 0) < wanted:
                self.close()
                raise UserError(f"each run asks for {wanted:g} {key}s but the Ray cluster has "
                                 f"{resources.get(key, 0):g}; lower execution.{key.lower()}s_per_run")
        fits = [resources.get(k, 0) / w for k, w in (("CPU", self.cpus_per_run), ("GPU", self.gpus_per_run)) if w]
        self.capacity = max(1, int(min(fits))) if fits else 1
        self._remote = remote_task(ray)

    def submit(self, job: Job) -> None:
        if self._remote is None:
            raise RuntimeError("submit() before start()")
        options = run_resources(job, cpus_per_run=self.cpus_per_run, gpus_per_run=self.gpus_per_run)
        task = self._remote.options(**options)  # max_calls=1 of ray.remote stays: options() cannot change it
        self._refs[task.remote(self._job_fn, job, options["num_gpus"])] = job

    def pending(self) -> int:
        return len(self._refs)

    def wait(self) -> tuple[Job, Outcome]:
        ray = import_ray()
        if not self._refs:
            raise RuntimeError("wait() with no submitted job")
        ready, _ = ray.wait(list(self._refs), num_returns=1)
        job = self._refs.pop(ready[0])
        try:
            return job, ray.get(ready[0])
        except ray.exceptions.RayError as exc:  # the task raised, or its worker died or was killed
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            return job, Outcome(run_id=job.run_id, status="failed", result=None,
                                error=f"Ray worker failed: {type(exc).__name__}: {first}",
                                worker=f"ray via {worker_name()}")

    def close(self) -> None:
        if self._owns_ray:
            import_ray().shutdown()
            self._owns_ray = False
        self._refs.clear()

    def describe(self) -> str:
        where = f"cluster at {self.address}" if self.address else f"local cluster (temp {self.temp_dir})"
        gpus = "auto" if self.gpus_per_run is None else f"{self.gpus_per_run:g}"
        text = f"ray, {where}, {self.cpus_per_run:g} CPU / {gpus} GPU per process of a run"
        return text + (f"; note: {self.note}" if self.note else "")


__all__ = ["RayExecutor", "check_address", "connect_timeout", "import_ray", "ray_temp_dir", "remote_task", "run_resources"]
