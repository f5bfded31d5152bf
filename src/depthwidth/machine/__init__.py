"""What the device is and can do: capabilities, the measured profile and where it is kept, the MFU
peak, and the one reading of a hardware argument. Asked by every layer above (model, data, train,
bench, study, report, cli); imports only the standard library, `depthwidth.errors`,
`depthwidth.shapes` and, inside the functions that measure, torch.

    device.py    capabilities (CPU name and flags, CUDA compute capability, native dtypes), device names
    slow.py      the one-line refusal of a dtype the device only emulates
    paths.py     the cache folder and the profile files
    profile.py   HardwareProfile / GemmResult, load and save (atomic), conversion to HardwareSpec
    stored.py    which stored profile fits a use
    measure.py   GEMM, copy bandwidth, tiny-op costs -> a profile; the cached profile
    memory.py    free memory now, and a one-line refusal of what cannot fit
    host_memory.py  freed host memory kept in the process (glibc mallopt), so CPU steps do not fault pages
    processes.py the cores, the threads or workers a run may ask for here, a child that ends with its
                 parent, one process at a time in a folder (`FolderLock`)
    peak.py      the MFU denominator: config, else a stored profile, else a GEMM timed now
    resolve.py   a hardware argument (table name, "measured", profile path) -> HardwareSpec
"""

from depthwidth.machine.device import (
    BF16_CPU_FLAGS,
    CPU_PROFILE_DTYPES,
    CUDA_PROFILE_DTYPES,
    CpuInfo,
    DeviceCapabilities,
    capabilities,
    check_device,
    cpu_capabilities,
    cuda_capabilities,
    cuda_index,
    device_kind,
    device_name,
    parse_cpuinfo,
    profile_dtypes,
    read_cpuinfo,
    resolve_device,
)
from depthwidth.machine.measure import (
    BlockOverhead,
    best_seconds,
    cached_profile,
    default_gemm_n,
    gemm_profile,
    measure_copy_bandwidth,
    measure_gemm,
    measure_op_overheads,
    measure_profile,
    memory_capacity,
    probe_gemm,
    torch_threads,
)
from depthwidth.machine.memory import available_memory, check_fits
from depthwidth.machine.processes import (
    PER_CORE,
    FolderLock,
    available_cores,
    check_per_core,
    die_with_parent,
    is_locked,
    per_core_limit,
)
from depthwidth.machine.paths import (
    CACHE_ENV,
    PROFILE_ENV,
    cache_dir,
    device_slug,
    env_seconds,
    profile_candidates,
    profile_path,
)
from depthwidth.machine.peak import PeakFlops, peak_flops
from depthwidth.machine.profile import (
    GemmResult,
    HardwareProfile,
    load_profile,
    profile_to_hardware,
    save_profile,
)
from depthwidth.machine.resolve import MEASURED, hardware_choice, is_measured, measured_hardware, resolve_hardware
from depthwidth.machine.slow import check_dtype, slow_dtype_line
from depthwidth.machine.stored import EAGER_BLOCK_OP, ProfileMatch, find_profile

__all__ = [
    "BF16_CPU_FLAGS",
    "CACHE_ENV",
    "CPU_PROFILE_DTYPES",
    "CUDA_PROFILE_DTYPES",
    "EAGER_BLOCK_OP",
    "MEASURED",
    "PER_CORE",
    "PROFILE_ENV",
    "BlockOverhead",
    "CpuInfo",
    "DeviceCapabilities",
    "GemmResult",
    "HardwareProfile",
    "PeakFlops",
    "ProfileMatch",
    "FolderLock",
    "available_cores",
    "available_memory",
    "best_seconds",
    "cache_dir",
    "cached_profile",
    "capabilities",
    "check_device",
    "check_dtype",
    "check_fits",
    "check_per_core",
    "cpu_capabilities",
    "cuda_capabilities",
    "cuda_index",
    "default_gemm_n",
    "device_kind",
    "device_name",
    "device_slug",
    "die_with_parent",
    "env_seconds",
    "find_profile",
    "gemm_profile",
    "hardware_choice",
    "is_locked",
    "is_measured",
    "load_profile",
    "measure_copy_bandwidth",
    "measure_gemm",
    "measure_op_overheads",
    "measure_profile",
    "measured_hardware",
    "memory_capacity",
    "parse_cpuinfo",
    "peak_flops",
    "per_core_limit",
    "probe_gemm",
    "profile_candidates",
    "profile_dtypes",
    "profile_path",
    "profile_to_hardware",
    "read_cpuinfo",
    "resolve_device",
    "resolve_hardware",
    "save_profile",
    "slow_dtype_line",
    "torch_threads",
]
