"""hack/ramdisk_modules.py: the agent's ramdisk keeps the modules named, what they need, and crypto and library
modules; nothing else."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "hack" / "ramdisk_modules.py"
spec = importlib.util.spec_from_file_location("ramdisk_modules", SCRIPT)
ramdisk_modules = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ramdisk_modules)

MODULES_DEP = """\
kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/net/core/failover.ko:
kernel/fs/ext4/ext4.ko: kernel/fs/jbd2/jbd2.ko kernel/fs/mbcache.ko
kernel/fs/jbd2/jbd2.ko:
kernel/fs/mbcache.ko:
kernel/crypto/crc32c_generic.ko:
kernel/lib/crc16.ko:
kernel/sound/core/snd.ko:
kernel/drivers/gpu/drm/drm.ko:
kernel/fs/nfs/nfs.ko: kernel/fs/lockd/lockd.ko
kernel/fs/lockd/lockd.ko:
kernel/drivers/scsi/sr_mod.ko: kernel/drivers/cdrom/cdrom.ko
kernel/drivers/cdrom/cdrom.ko:
kernel/arch/x86/crypto/crc32c-intel.ko:
"""
MODULES_SOFTDEP = """\
# Soft dependencies extracted from modules themselves.
softdep ext4 pre: crc16
softdep virtio-net post: sr_mod
"""


@pytest.fixture
def modules(tmp_path):
    (tmp_path / "modules.dep").write_text(MODULES_DEP)
    (tmp_path / "modules.softdep").write_text(MODULES_SOFTDEP)
    for line in MODULES_DEP.splitlines():
        path = tmp_path / line.split(":")[0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\0")
    return tmp_path


@pytest.mark.parametrize(("wanted", "kept"), [
    (["virtio_net"], {"virtio_net", "net_failover", "failover", "sr_mod", "cdrom"}),  # deps and a post softdep
    (["ext4"], {"ext4", "jbd2", "mbcache", "crc16"}),  # a pre softdep
    ([], set()),
])
def test_the_named_modules_what_they_need_and_crypto_and_libraries_are_kept(modules, wanted, kept):
    ramdisk_modules.main(str(modules), wanted)
    left = {path.name.split(".ko")[0].replace("-", "_") for path in modules.rglob("*.ko")}
    assert left == kept | {"crc32c_generic", "crc16", "crc32c_intel"}


def test_a_module_the_kernel_does_not_have_stops_the_build_naming_it(modules):
    with pytest.raises(SystemExit, match="no such module in the ramdisk's kernel: virtio_gpu"):
        ramdisk_modules.main(str(modules), ["ext4", "virtio_gpu"])
    assert len(list(modules.rglob("*.ko"))) == len(MODULES_DEP.splitlines())  # nothing deleted
