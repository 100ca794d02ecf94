"""Power-mode control: nvpmodel presets, custom modes, jetson_clocks, or host threads; always restored."""

from jetpredict.profiler.powermode.base import PowerModeController
from jetpredict.profiler.powermode.custom import SOC_PATHS, SocPaths, SysfsController, read_clocks
from jetpredict.profiler.powermode.detect import detect_controller, jetson_board
from jetpredict.profiler.powermode.host import HostController
from jetpredict.profiler.powermode.nvpmodel import (
    NvpmodelConf,
    NvpmodelController,
    parse_nvpmodel_conf,
    parse_nvpmodel_query,
    render_custom_model,
)
from jetpredict.profiler.powermode.privileged import PrivilegedCommandError, run_privileged, write_sysfs

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
