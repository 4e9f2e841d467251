"""Drives a PlasmaFS WebHDFS gateway with real Python clients: fsspec's
WebHDFS file system and the `hdfs` package (InsecureClient: pseudo
authentication). Usage: webhdfs_clients.py HOST PORT. Prints OK at the end;
any failed check raises (exit status 1)."""

import sys

import fsspec
import hdfs

host, port = sys.argv[1], int(sys.argv[2])
data = bytes(range(256)) * 1000  # 256000 bytes: several 64 KiB blocks


def expect(exc, fn, what):
    try:
        fn()
    except exc:
        return
    except Exception as e:  # the wrong exception
        raise AssertionError(f"{what}: raised {type(e).__name__}: {e}, want {exc.__name__}")
    raise AssertionError(f"{what}: no error, want {exc.__name__}")


# ---- fsspec (WebHDFS implementation)
fs = fsspec.filesystem("webhdfs", host=host, port=port, user="alice")
fs.mkdir("/work/py")
with fs.open("/work/py/a.bin", "wb") as f:
    f.write(data)
assert fs.cat_file("/work/py/a.bin") == data, "fsspec: whole file"
assert fs.cat_file("/work/py/a.bin", start=1000, end=70000) == data[1000:70000], "fsspec: range"
with fs.open("/work/py/a.bin", "rb") as f:
    f.seek(100000)
    assert f.read(5000) == data[100000:105000], "fsspec: seek and read"
with fs.open("/work/py/keep.bin", "wb") as f:
    f.write(b"kept by fsspec\n")
names = sorted(e["name"] for e in fs.ls("/work/py", detail=True))
assert names == ["/work/py/a.bin", "/work/py/keep.bin"], names
info = fs.info("/work/py/a.bin")
assert info["size"] == len(data) and info["type"] == "file", info
fs.mv("/work/py/a.bin", "/work/py/b.bin")
assert not fs.exists("/work/py/a.bin") and fs.info("/work/py/b.bin")["size"] == len(data), "fsspec: mv"
fs.rm("/work/py/b.bin")
assert not fs.exists("/work/py/b.bin"), "fsspec: rm"
expect(PermissionError, lambda: fs.cat_file("/secret"), "fsspec: read of another user's 0600 file")
expect(PermissionError, lambda: fs.mkdir("/admin-dir/sub"), "fsspec: mkdir in another user's 0755 directory")
expect(FileNotFoundError, lambda: fs.info("/work/nothing"), "fsspec: info of a missing file")
expect(ValueError, lambda: fs._call("FROBNICATE", path="/work"), "fsspec: unknown operation")

# ---- hdfs (InsecureClient)
c = hdfs.InsecureClient(f"http://{host}:{port}", user="alice")
c.write("/work/h/x.txt", data=b"hello hdfs\n", overwrite=True)
with c.read("/work/h/x.txt", offset=6, length=4) as r:
    assert r.read() == b"hdfs", "hdfs: range read"
c.write("/work/h/x.txt", data=b"more\n", append=True)
with c.read("/work/h/x.txt") as r:
    assert r.read() == b"hello hdfs\nmore\n", "hdfs: append"
assert c.list("/work/h") == ["x.txt"], c.list("/work/h")
c.rename("/work/h/x.txt", "/work/h/y.txt")
st = c.status("/work/h/y.txt")
assert st["length"] == 16 and st["owner"] == "alice" and st["type"] == "FILE", st
assert c.content("/work/h")["fileCount"] == 1
assert c.checksum("/work/h/y.txt")["algorithm"] == "MD5-of-0MD5-of-512CRC32C"
c.set_permission("/work/h/y.txt", "600")
assert c.status("/work/h/y.txt")["permission"] == "600"
c.makedirs("/work/h/d/e")
assert c.delete("/work/h", recursive=True)
assert c.status("/work/h", strict=False) is None, "hdfs: delete recursive"


def hdfs_exception(fn):
    try:
        fn()
    except hdfs.HdfsError as e:
        return e.exception
    raise AssertionError("no HdfsError")


def read_secret():
    with c.read("/secret") as r:
        r.read()


exc = hdfs_exception(read_secret)
assert exc == "AccessControlException", exc
exc = hdfs_exception(lambda: c.write("/admin-dir/x", data=b"x"))
assert exc == "AccessControlException", exc
exc = hdfs_exception(lambda: c.write("/work/py/keep.bin", data=b"x"))
assert exc == "FileAlreadyExistsException", exc
exc = hdfs_exception(lambda: c.status("/work/nothing"))
assert exc == "FileNotFoundException", exc
print("OK")
