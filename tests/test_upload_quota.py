"""Upload quotas (issue "Trust nothing a visitor sends", item 7): per-client rate and
bytes shared by all workers, a disk budget with oldest-first eviction, refused files
deleted at once."""

from __future__ import annotations

import io

import pytest

from dashboard.callbacks.load import describe_data, describe_models
from dashboard.config import Config
from dashboard.server import create_app


def _app(tmp_path, **options):
    return create_app(Config(cache_dir=str(tmp_path / "cache"), **options))


def _post(client, size: int, *, addr: str = "10.0.0.1", name: str = "d.csv"):
    body = b"a,b\n" + b"1,2\n" * max((size - 4) // 4, 1)
    return client.post(
        "/upload",
        data={"kind": "data", "file": (io.BytesIO(body), name)},
        content_type="multipart/form-data",
        environ_base={"REMOTE_ADDR": addr},
    )


def _uploads(app):
    return sorted(p.name for p in (app._wip_context.store.root / "uploads").iterdir())


def test_upload_rate_per_client(tmp_path):
    """The audit's 120 uploads in a second: past the rate a client gets 429 with when to
    retry; another address is unaffected."""
    app = _app(tmp_path, upload_per_minute=3)
    client = app.server.test_client()
    assert [_post(client, 100).status_code for _ in range(3)] == [200, 200, 200]
    refused = _post(client, 100)
    assert refused.status_code == 429 and "at most 3 per minute" in refused.json["error"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 61
    assert _post(client, 100, addr="10.0.0.2").status_code == 200
    assert len(_uploads(app)) == 4, "a refused upload leaves nothing on disk"


def test_upload_bytes_per_client_and_hour(tmp_path):
    app = _app(tmp_path, upload_mb_per_hour=1)
    client = app.server.test_client()
    assert _post(client, 600_000).status_code == 200
    refused = _post(client, 600_000)
    assert refused.status_code == 429 and "MiB per hour" in refused.json["error"]
    assert _post(client, 600_000, addr="10.9.9.9").status_code == 200


def test_quotas_are_shared_by_workers(tmp_path):
    """Two app instances on one cache folder (two gunicorn workers) count together."""
    first, second = _app(tmp_path, upload_per_minute=2), _app(tmp_path, upload_per_minute=2)
    a, b = first.server.test_client(), second.server.test_client()
    assert _post(a, 100).status_code == 200 and _post(b, 100).status_code == 200
    assert _post(a, 100).status_code == 429 and _post(b, 100).status_code == 429


def test_disk_budget_evicts_the_oldest_uploads_first(tmp_path):
    app = _app(tmp_path, upload_disk_mb=1, upload_limit_mb=1)
    client = app.server.test_client()
    ids = [_post(client, 400_000, addr=f"10.0.1.{k}").json["id"] for k in range(3)]
    store = app._wip_context.store
    assert store.upload_path(ids[0]) is None, "the oldest upload is evicted"
    assert store.upload_path(ids[1]) is not None and store.upload_path(ids[2]) is not None


def test_too_big_upload_leaves_no_file(tmp_path):
    app = _app(tmp_path, upload_limit_mb=1)
    client = app.server.test_client()
    assert _post(client, 3 * 2**20).status_code == 413
    assert _uploads(app) == []


@pytest.mark.parametrize("name, content", [("sheet.csv", b"PK\x03\x04" + b"\0" * 100), ("model.skops", b"not a zip")])
def test_refused_files_are_deleted_at_once(tmp_path, name, content):
    """A file the checks refuse does not wait for the 24 h TTL (only why it was refused stays,
    a few hundred bytes, so a later Load can say it)."""
    app = _app(tmp_path)
    ctx = app._wip_context
    token, path = ctx.store.new_upload(name)
    path.write_bytes(content)
    upload = {"id": token, "name": name, "size": len(content)}
    if name.endswith(".csv"):
        assert describe_data(ctx, upload).error
    else:
        assert describe_models(ctx, [upload]).error
    assert ctx.store.upload_path(token) is None and not path.exists()
    left = list(path.parent.iterdir())
    assert [f.name for f in left] == [".refused"] and left[0].stat().st_size < 2100
    assert name in ctx.store.upload_gone(token, name) and "expired" not in ctx.store.upload_gone(token, name)


def test_ipv6_clients_share_their_64_prefix(tmp_path):
    from dashboard.quota import client_key

    assert client_key("2001:db8:1:2::5") == client_key("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::5") != client_key("2001:db8:1:2::5")
    assert client_key("::ffff:10.0.0.7") == "10.0.0.7" and client_key("garbage") == "unknown"
    app = _app(tmp_path, upload_per_minute=1)
    client = app.server.test_client()
    assert _post(client, 100, addr="2001:db8:1:2::5").status_code == 200
    assert _post(client, 100, addr="2001:db8:1:2::77").status_code == 429


def test_an_upload_being_received_is_never_evicted(tmp_path):
    """Another worker's upload still streaming (its folder holds the marker) keeps its
    file even when the budget is exceeded; finished ones go first."""
    from dashboard.quota import WRITING

    app = _app(tmp_path, upload_disk_mb=1, upload_limit_mb=1)
    store = app._wip_context.store
    token, path = store.new_upload("streaming.csv")
    path.write_bytes(b"x" * 700_000)
    (path.parent / WRITING).touch()
    (path.parent / WRITING).touch()
    client = app.server.test_client()
    response = _post(client, 500_000)
    assert path.exists(), "the upload being received was evicted"
    assert response.status_code == 507 and "full" in response.json["error"]
    assert store.upload_path(token) == path  # the marker is not taken for the file


def test_a_failed_write_leaves_nothing_and_answers_json(tmp_path, monkeypatch):
    import errno

    from werkzeug.datastructures import FileStorage

    def full(self, dst, buffer_size=16384):
        with open(dst, "wb") as out:
            out.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(FileStorage, "save", full)
    app = _app(tmp_path)
    response = _post(app.server.test_client(), 1000)
    assert response.status_code == 507 and "no space left" in response.json["error"]
    assert _uploads(app) == []
