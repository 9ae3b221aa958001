"""Other local users (issue 22): files that hold a secret (the connection file, the CURVE secret key file) are
readable by their owner only from their first byte, a secret key file others may read is refused with how to fix it,
and a host on an abstract ipc socket, which any local user can reach, says so."""

from __future__ import annotations

import json
import secrets
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
import zmq

from conftest import ZEROBRIDGE_BIN, HostProcess
from zerobridge import curve

STARTS = 50

# Another local user watching the folder: it opens every file as soon as inotify names it (an open descriptor keeps
# its access after a later chmod) and reads from each again on every event and at the end. Standard library only.
WATCHER = r"""
import ctypes, json, os, struct, sys
folder = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
IN_MODIFY, IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE = 0x2, 0x8, 0x80, 0x100
fd = libc.inotify_init1(os.O_CLOEXEC)
if fd < 0 or libc.inotify_add_watch(fd, folder.encode(), IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE) < 0:
    print(json.dumps({"error": os.strerror(ctypes.get_errno())}), flush=True)
    sys.exit(1)
print("watching", flush=True)
held, seen, opened, read = {}, set(), 0, {}

def read_all(name, descriptor):
    data = os.pread(descriptor, 1 << 16, 0)
    if len(data) > len(read.get(name, b"")):
        read[name] = data

done = False
while not done:
    buffer = os.read(fd, 1 << 16)
    offset = 0
    while offset < len(buffer):
        _, mask, _, length = struct.unpack_from("iIII", buffer, offset)
        name = buffer[offset + 16 : offset + 16 + length].rstrip(b"\0").decode()
        offset += 16 + length
        if name == "done":
            done = True
            continue
        seen.add(name)
        if name not in held:
            try:
                held[name] = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
                opened += 1
            except OSError:
                continue
        read_all(name, held[name])
for name, descriptor in held.items():
    read_all(name, descriptor)
print(json.dumps({"seen": sorted(seen), "opened": opened, "read": {n: d.decode(errors="replace") for n, d in read.items()}}), flush=True)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="playing another user (setpriv to nobody) needs root; CI runs as root")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed")
def test_another_user_watching_the_folder_reads_no_secret_over_50_host_starts() -> None:
    folder = Path(tempfile.mkdtemp(prefix="zb-secrets-"))
    folder.chmod(0o1777)  # a shared folder such as /tmp: everyone may list it and open what is readable in it
    watcher = subprocess.Popen(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", "-c", WATCHER, str(folder)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/",
    )
    curve_keys: list[str] = []
    connection_keys: list[str] = []
    previous_umask = os.umask(0o022)  # the usual umask, under which a file created 0666 & ~umask is world-readable
    try:
        assert watcher.stdout is not None
        assert watcher.stdout.readline().strip() == "watching", watcher.stderr.read() if watcher.stderr else ""
        for run in range(STARTS):
            host = HostProcess("tcp://127.0.0.1:*", "--connection-file", str(folder / f"host-{run}.json"),
                               "--curve-secret-key-file", str(folder / f"host-{run}.key"))
            curve_keys.append((folder / f"host-{run}.key").read_text().strip())
            connection_keys.append(json.loads((folder / f"host-{run}.json").read_text())["key"])
            host.stop()  # which removes its connection file
        (folder / "done").touch()
        output, errors = watcher.communicate(timeout=60)
    finally:
        os.umask(previous_umask)
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
        shutil.rmtree(folder, ignore_errors=True)
    assert watcher.returncode == 0, errors
    report = json.loads(output.strip().splitlines()[-1])
    # It really watched: it was told of every connection file and key file.
    for run in range(STARTS):
        assert f"host-{run}.json" in report["seen"] and f"host-{run}.key" in report["seen"], report["seen"]
    texts = report["read"].values()
    curve_read = sum(any(key in text for text in texts) for key in curve_keys)
    connection_read = sum(any(key in text for text in texts) for key in connection_keys)
    assert (curve_read, connection_read) == (0, 0), (
        f"another user read the CURVE secret key in {curve_read} of {STARTS} starts and the connection key in "
        f"{connection_read}, from {len(report['read'])} files: {sorted(report['read'])}")
    assert sum(map(len, texts)) == 0, f"another user read bytes of {sorted(report['read'])}"


def test_the_host_refuses_a_curve_secret_key_file_others_may_read(ipc_dir: Path) -> None:
    key_file = ipc_dir / "host.key"
    key_file.write_text(zmq.curve_keypair()[1].decode() + "\n")
    key_file.chmod(0o644)
    result = subprocess.run([ZEROBRIDGE_BIN, "serve", "--conformance", "--endpoint", f"ipc://{ipc_dir}/h.sock",
                             "--curve-secret-key-file", str(key_file)], capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert f"permissions 0644 for '{key_file}' are too open" in result.stderr, result.stderr
    assert f"chmod 600 {key_file}" in result.stderr, result.stderr
    assert "zerobridge ready" not in result.stdout


def test_the_host_creates_its_curve_secret_key_and_connection_file_owner_only(ipc_dir: Path) -> None:
    key_file, connection_file = ipc_dir / "host.key", ipc_dir / "host.json"
    host = HostProcess(f"ipc://{ipc_dir}/h.sock", "--connection-file", str(connection_file),
                       "--curve-secret-key-file", str(key_file))
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(connection_file.stat().st_mode) == 0o600
    host.stop()
    assert [p.name for p in ipc_dir.iterdir() if ".tmp-" in p.name] == []  # no temporary file left behind
    again = HostProcess(f"ipc://{ipc_dir}/h.sock", "--connection-file", str(connection_file),
                        "--curve-secret-key-file", str(key_file))  # the key it kept is accepted
    again.stop()


def test_the_python_peer_refuses_a_secret_key_file_others_may_read(tmp_path: Path) -> None:
    key_file = tmp_path / "peer.key"
    key_file.write_text(zmq.curve_keypair()[1].decode() + "\n")
    key_file.chmod(0o640)
    with pytest.raises(ValueError, match=r"permissions 0640 for '.*peer\.key' are too open.*chmod 600 .*peer\.key"):
        curve.load_secret_key_file(key_file)
    key_file.chmod(0o600)
    public, _ = curve.load_secret_key_file(key_file)
    assert len(public) == 40


def test_the_python_peer_creates_its_secret_key_file_owner_only(tmp_path: Path) -> None:
    key_file = tmp_path / "new.key"
    previous_umask = os.umask(0)  # even with no umask at all
    try:
        public, secret = curve.load_secret_key_file(key_file)
    finally:
        os.umask(previous_umask)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert key_file.read_text().strip() == secret
    assert curve.load_secret_key_file(key_file) == (public, secret)
    assert [p.name for p in tmp_path.iterdir()] == ["new.key"]  # no temporary file left behind


def test_a_host_on_an_abstract_ipc_socket_without_a_key_warns_that_any_local_user_can_connect(ipc_dir: Path) -> None:
    warning = "abstract ipc socket (ipc://@) without a key or CURVE: any local user can connect"
    open_host = HostProcess(f"ipc://@zb-abstract-{secrets.token_hex(6)}")
    assert warning in open_host.stderr_text(), open_host.stderr_text()
    open_host.stop()
    keyed = HostProcess(f"ipc://@zb-abstract-{secrets.token_hex(6)}", "--connection-file", str(ipc_dir / "host.json"))
    assert warning not in keyed.stderr_text(), keyed.stderr_text()
    keyed.stop()
