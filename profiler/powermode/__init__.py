"""Power-mode control: nvpmodel presets, custom modes, jetson_clocks, or host threads; always restored."""

from profiler.powermode.base import PowerModeController
from profiler.powermode.custom import SOC_PATHS, SocPaths, SysfsController, read_clocks
from profiler.powermode.detect import detect_controller, jetson_board
from profiler.powermode.host import HostController
from profiler.powermode.nvpmodel import (
    NvpmodelConf,
    NvpmodelController,
    parse_nvpmodel_conf,
    parse_nvpmodel_query,
    render_custom_model,
)
from profiler.powermode.privileged import PrivilegedCommandError, run_privileged, write_sysfs

__all__ = [
    "SOC_PATHS",
    "HostController",
    "NvpmodelConf",
    "NvpmodelController",
    "PowerModeController",
    "PrivilegedCommandError",
    "SocPaths",
    "SysfsController",
    "detect_controller",
    "jetson_board",
    "parse_nvpmodel_conf",
    "parse_nvpmodel_query",
    "read_clocks",
    "render_custom_model",
    "run_privileged",
    "write_sysfs",
]
