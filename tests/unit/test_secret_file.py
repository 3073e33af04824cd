"""Secret files (config/secret_file.py): what may hold a password or keytab, and warnings on loose ones.

Issue 25, defect 6: a directory, FIFO or device was refused as "does not exist"; /proc/self/environ was
accepted and sent the whole environment as the password; a world-readable file got no warning."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest
from mssql_memory_exporter.config import ConfigError, CredentialError, parse_config
from mssql_memory_exporter.config.secret_file import SecretFileError, check_secret_file, read_secret_file

from tests.conftest import PASSWORD_ENV


def config_with(path: str) -> dict:
    return {
        "auth_modules": {"monitor": {"username": "u", "password_file": path}},
        "targets": {"t": {"host": "sql.example.com", "auth_module": "monitor"}},
    }


def refusal(path: str | Path) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(config_with(str(path)))
    line = str(info.value)
    assert line.startswith("<config>: auth_modules.monitor.password_file: "), line
    return line


def secret(tmp_path: Path, mode: int = 0o600, content: str = "pw\n") -> Path:
    path = tmp_path / "secret"
    path.write_text(content)
    path.chmod(mode)
    return path


def test_a_directory_is_named_as_one(tmp_path: Path):
    assert f"{tmp_path} is a directory, not a regular file" in refusal(tmp_path)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    result: list[str] = []
    # Opening a FIFO for reading blocks until a writer comes; the check must not.
    worker = threading.Thread(target=lambda: result.append(refusal(fifo)), daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert result, "checking a FIFO blocked"
    assert "is a named pipe (FIFO), not a regular file" in result[0]


@pytest.mark.integration
def test_a_socket_is_refused(tmp_path: Path):
    path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        assert "is a socket, not a regular file" in refusal(path)


def test_a_device_is_refused():
    assert "/dev/null is a character device, not a regular file" in refusal("/dev/null")


def test_proc_files_are_not_secrets(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SOME_OTHER_SECRET", "never-a-password")
    message = refusal("/proc/self/environ")
    assert "is on the kernel's proc filesystem" in message
    assert "never-a-password" not in message


def test_a_symlink_into_proc_is_refused(tmp_path: Path):
    link = tmp_path / "password"
    link.symlink_to("/proc/self/environ")
    assert "is on the kernel's proc filesystem" in refusal(link)


def test_a_missing_file_and_a_dangling_symlink_are_told_apart(tmp_path: Path):
    assert f"{tmp_path / 'nope'} does not exist" in refusal(tmp_path / "nope")
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "gone")
    assert "is a symlink to a file that does not exist" in refusal(link)


def kubernetes_secret_volume(root: Path, password: str) -> Path:
    """The layout kubelet writes: key -> ..data/key, ..data -> ..<timestamp>/ (swapped on rotation)."""
    stamped = root / "..2026_11_27_09_00_00.123456789"
    stamped.mkdir()
    (stamped / "password").write_text(password)
    (stamped / "password").chmod(0o440)
    (root / "..data").symlink_to(stamped.name)
    (root / "password").symlink_to("..data/password")
    return root / "password"


def test_a_kubernetes_secret_mount_is_accepted_and_rotates(tmp_path: Path):
    path = kubernetes_secret_volume(tmp_path, "first")
    config = parse_config(config_with(str(path)))
    assert config.credentials_for("t").password.get_secret_value() == "first"
    assert config.secret_warnings() == []
    # Rotation: kubelet writes a new timestamped directory and swaps ..data to it.
    newer = tmp_path / "..2026_11_27_10_00_00.1"
    newer.mkdir()
    (newer / "password").write_text("second")
    (tmp_path / "..data.tmp").symlink_to(newer.name)
    os.replace(tmp_path / "..data.tmp", tmp_path / "..data")
    assert config.credentials_for("t").password.get_secret_value() == "second"


def test_a_world_readable_file_is_warned_about(tmp_path: Path):
    path = secret(tmp_path, 0o644)
    config = parse_config(config_with(str(path)))
    warnings = config.secret_warnings()
    assert len(warnings) == 1
    assert warnings[0].startswith(f"auth_modules.monitor.password_file: {path} is readable by every user")
    assert "mode 0644" in warnings[0]


def test_a_private_file_gets_no_warning(tmp_path: Path):
    assert parse_config(config_with(str(secret(tmp_path, 0o600)))).secret_warnings() == []


def test_group_readable_by_a_group_the_exporter_is_not_in(tmp_path: Path):
    path = secret(tmp_path, 0o640)
    foreign = next((g for g in range(1, 65534) if g not in {os.getegid(), *os.getgroups()}), None)
    try:
        os.chown(path, -1, foreign)
    except PermissionError:
        # An unprivileged user can only give a file to a group of their own: no warning then.
        assert check_secret_file(str(path)) == []
        pytest.skip("cannot give the file to another group without privileges")
    assert "is readable by group" in check_secret_file(str(path))[0]


def test_owned_by_another_user_is_warned_about(tmp_path: Path):
    path = secret(tmp_path, 0o600)
    try:
        os.chown(path, 4242, -1)
    except PermissionError:
        pytest.skip("cannot give a file away without privileges")
    warnings = check_secret_file(str(path))
    assert any("is owned by uid 4242" in w and "can change the secret" in w for w in warnings), warnings


def test_unreadable_file_says_who_cannot_read_it(tmp_path: Path):
    path = secret(tmp_path, 0)
    if os.access(path, os.R_OK):
        pytest.skip("running as a user who can read anything (root)")
    message = refusal(path)
    assert "is not readable by the exporter's user" in message
    assert "mode 0000" in message


def test_a_file_swapped_for_a_fifo_after_load_fails_the_login_without_blocking(tmp_path: Path):
    path = secret(tmp_path)
    config = parse_config(config_with(str(path)))
    path.unlink()
    os.mkfifo(path)
    errors: list[Exception] = []

    def login() -> None:
        try:
            config.credentials_for("t")
        except CredentialError as exc:
            errors.append(exc)

    worker = threading.Thread(target=login, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert errors, "reading the password from a FIFO blocked"
    assert "is a named pipe" in str(errors[0])


def test_an_oversized_file_is_not_read_whole(tmp_path: Path):
    path = secret(tmp_path, content="x" * 5000)
    with pytest.raises(SecretFileError, match="larger than 4096 bytes"):
        read_secret_file(str(path), max_bytes=4096)


def test_env_sources_have_no_file_warnings(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(PASSWORD_ENV, "pw")
    data = {
        "auth_modules": {"monitor": {"username": "u", "password_env": PASSWORD_ENV}},
        "targets": {"t": {"host": "h", "auth_module": "monitor"}},
    }
    assert parse_config(data).secret_warnings() == []
