"""``cs.copy`` of h5py files, groups and datasets (issue 30 item 5, issue 34 item 1).

A dataset's bytes can live in other files (external storage, external links, virtual
datasets): each is refused naming the dataset, with nothing created and nothing of the
outside file copied, unless ``allow_external`` names the directory it is in. Metadata is
translated: dimension scales -> dimension names, ``_FillValue`` -> fill value,
attributes -> JSON (NaN bare, as zarr-python writes it), the rest skipped with a warning
naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ExternalDataError

h5py = pytest.importorskip("h5py")

SECRET = b"SECRET-0123456789-abcdefghijklmnopqrstuvwxyz!"  # 45 bytes


@pytest.fixture
def dirs(tmp_path):
    """``inside`` (where the untrusted files are) and ``outside`` (a secret file and an
    HDF5 file holding the secret)."""
    inside, outside = tmp_path / "in", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    (outside / "secret.bin").write_bytes(SECRET)
    with h5py.File(outside / "src.h5", "w") as f:
        f["data"] = np.frombuffer(SECRET, "u1")
        f.create_group("grp")["data"] = np.frombuffer(SECRET, "u1")
    return inside, outside


def _external(path, target, **kw):
    with h5py.File(path, "w") as f:
        f.create_dataset("x", shape=(45,), dtype="u1", external=[(str(target), 0, 45)], **kw)
    return path


def _vds(path, source_file, name="data"):
    with h5py.File(path, "w") as f:
        layout = h5py.VirtualLayout(shape=(45,), dtype="u1")
        layout[:] = h5py.VirtualSource(str(source_file), name, shape=(45,))
        f.create_virtual_dataset("x", layout)
    return path


def _link(path, target_file, target="/data"):
    with h5py.File(path, "w") as f:
        f["ok"] = np.arange(3)
        f["x"] = h5py.ExternalLink(str(target_file), target)
    return path


def _evil_files(inside, outside):
    """name -> (file, the outside file it reads)."""
    return {
        "external storage": (_external(inside / "ext.h5", outside / "secret.bin"),
                             outside / "secret.bin"),
        "external link": (_link(inside / "link.h5", outside / "src.h5"), outside / "src.h5"),
        "virtual dataset": (_vds(inside / "vds.h5", outside / "src.h5"), outside / "src.h5"),
    }


def _no_secret_under(root) -> None:
    for dirpath, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as fh:
                assert b"SECRET" not in fh.read()


@pytest.mark.parametrize("kind", ["external storage", "external link", "virtual dataset"])
def test_copy_refuses_bytes_of_other_files(dirs, tmp_path, kind):
    inside, outside = dirs
    path, read = _evil_files(inside, outside)[kind]
    out = tmp_path / "o.zarr"
    with h5py.File(path, "r") as f:
        with pytest.raises(ExternalDataError) as e:
            cs.copy(f, str(out))
        message = str(e.value)
        assert "'/x'" in message and str(read) in message and "allow_external" in message
        assert not out.exists()
        # the opt-in names directories: one without the file is still refused
        with pytest.raises(ExternalDataError, match="outside the allowed directories"):
            cs.copy(f, str(out), allow_external=[str(inside)])
        assert not out.exists()
        copied = cs.copy(f, str(out), allow_external=[str(outside)])
        assert bytes(copied["x"][:]) == SECRET


@pytest.mark.parametrize("kind", ["external storage", "virtual dataset"])
def test_copy_of_the_dataset_itself_is_checked(dirs, tmp_path, kind):
    inside, outside = dirs
    path, _ = _evil_files(inside, outside)[kind]
    with h5py.File(path, "r") as f:
        with pytest.raises(ExternalDataError, match="dataset '/x'"):
            cs.copy(f["x"], str(tmp_path / "o.zarr"))
        assert not (tmp_path / "o.zarr").exists()
        a = cs.copy(f["x"], str(tmp_path / "o.zarr"), allow_external=str(outside))
        assert bytes(a[:]) == SECRET


def test_relative_external_file_is_resolved_as_hdf5_does(dirs, tmp_path, monkeypatch):
    """A relative name is read from the working directory, or under the prefix
    ``HDF5_EXTFILE_PREFIX`` held when HDF5 started (``${ORIGIN}``: the file's directory):
    the check looks where HDF5 reads (the copy then holds that file's bytes)."""
    inside, outside = dirs
    monkeypatch.chdir(inside)
    _external(inside / "rel.h5", "../outside/secret.bin")
    with h5py.File(inside / "rel.h5", "r") as f:
        with pytest.raises(ExternalDataError, match=str(outside / "secret.bin")):
            cs.copy(f, str(tmp_path / "a.zarr"), allow_external=[str(inside)])
        a = cs.copy(f, str(tmp_path / "a.zarr"), allow_external=[str(outside)])
        assert bytes(a["x"][:]) == SECRET
    _external(inside / "prefixed.h5", "secret.bin")
    monkeypatch.setenv("HDF5_EXTFILE_PREFIX", "${ORIGIN}/../outside")  # read as HDF5 starts
    script = f"""if True:
        import h5py, chunkstore as cs
        f = h5py.File({str(inside / "prefixed.h5")!r}, "r")
        try:
            cs.copy(f, {str(tmp_path / "b.zarr")!r}, allow_external=[{str(inside)!r}])
        except cs.ExternalDataError as e:
            print(e)
        print(bytes(cs.copy(f, {str(tmp_path / "c.zarr")!r},
                            allow_external=[{str(outside)!r}])["x"][:]).decode())
        """
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    refused, copied = done.stdout.splitlines()
    assert f"'{outside / 'secret.bin'}'" in refused and "outside the allowed" in refused
    assert copied == SECRET.decode() and not (tmp_path / "b.zarr").exists()
    # the variable set now (HDF5 read it when it started): both places are checked
    with h5py.File(inside / "prefixed.h5", "r") as f:
        with pytest.raises(ExternalDataError, match=f"'{inside / 'secret.bin'}'"):
            cs.copy(f, str(tmp_path / "d.zarr"), allow_external=[str(outside)])
    assert not (tmp_path / "d.zarr").exists()


def test_symlink_in_an_allowed_directory_is_followed_to_its_target(dirs, tmp_path):
    inside, outside = dirs
    (inside / "alias.bin").symlink_to(outside / "secret.bin")
    _external(inside / "ext.h5", inside / "alias.bin")
    with h5py.File(inside / "ext.h5", "r") as f:
        with pytest.raises(ExternalDataError, match=f"alias.bin \\(a link to {outside}"):
            cs.copy(f, str(tmp_path / "o.zarr"), allow_external=[str(inside)])
    assert not (tmp_path / "o.zarr").exists()


def test_links_through_links_are_checked(dirs, tmp_path):
    """A soft link leading through an external link, an external link to a file (in an
    allowed directory) holding a virtual dataset of an outside file, and a virtual
    dataset whose same-file source keeps its bytes outside: each refused."""
    inside, outside = dirs
    with h5py.File(inside / "soft.h5", "w") as f:
        f["ext"] = h5py.ExternalLink(str(outside / "src.h5"), "/grp")
        f["s"] = h5py.SoftLink("/ext/data")
    hop = tmp_path / "hop"
    hop.mkdir()
    _vds(hop / "vds.h5", outside / "src.h5")
    _link(inside / "chain.h5", hop / "vds.h5", "/x")
    with h5py.File(inside / "nested.h5", "w") as f:
        f.create_dataset("raw", shape=(45,), dtype="u1",
                         external=[(str(outside / "secret.bin"), 0, 45)])
        layout = h5py.VirtualLayout(shape=(45,), dtype="u1")
        layout[:] = h5py.VirtualSource(".", "raw", shape=(45,))
        f.create_virtual_dataset("x", layout)
    with h5py.File(inside / "soft.h5", "r") as f:
        with pytest.raises(ExternalDataError, match="external link"):
            cs.copy(f["/"], str(tmp_path / "a.zarr"))
    with h5py.File(inside / "chain.h5", "r") as f:
        with pytest.raises(ExternalDataError, match="virtual dataset reading another file"):
            cs.copy(f, str(tmp_path / "b.zarr"), allow_external=[str(hop)])
        c = cs.copy(f, str(tmp_path / "c.zarr"), allow_external=[str(hop), str(outside)])
        assert bytes(c["x"][:]) == SECRET
    with h5py.File(inside / "nested.h5", "r") as f:
        with pytest.raises(ExternalDataError, match="'/raw'"):
            cs.copy(f["x"], str(tmp_path / "d.zarr"))
    for name in "abd":
        assert not (tmp_path / f"{name}.zarr").exists()


def test_allow_external_must_name_directories(dirs, tmp_path):
    inside, outside = dirs
    with h5py.File(_external(inside / "ext.h5", outside / "secret.bin"), "r") as f:
        with pytest.raises(TypeError, match="name the directories"):
            cs.copy(f, str(tmp_path / "o.zarr"), allow_external=True)
        with pytest.raises(ValueError, match="not a directory"):
            cs.copy(f, str(tmp_path / "o.zarr"), allow_external=[str(outside / "secret.bin")])
    assert not (tmp_path / "o.zarr").exists()


def test_plain_file_copies_without_opt_in(tmp_path):
    """Same-file virtual datasets and soft links read nothing outside: no opt-in needed."""
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f["raw"] = np.arange(6, dtype="i2")
        layout = h5py.VirtualLayout(shape=(6,), dtype="i2")
        source = h5py.VirtualSource(".", "raw", shape=(6,))
        layout[:3], layout[3:] = source[3:], source[:3]
        f.create_virtual_dataset("rev", layout)
        f["alias"] = h5py.SoftLink("/raw")
        f["loop"] = h5py.SoftLink("/")
    with h5py.File(tmp_path / "f.h5", "r") as f, warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        g = cs.copy(f, str(tmp_path / "o.zarr"))
    np.testing.assert_array_equal(g["rev"][:], [3, 4, 5, 0, 1, 2])
    np.testing.assert_array_equal(g["alias"][:], np.arange(6))
    assert sorted(g.array_keys()) == ["alias", "raw", "rev"]
    assert [str(x.message) for x in w] == [
        f"{tmp_path / 'f.h5'}: group '/': member 'loop' skipped: a link to a group that "
        "holds it"]


def test_what_zarr_cannot_hold_is_left_out_with_a_warning(tmp_path):
    """Loops of soft links, hard links to a group above, object references, empty
    datasets: a warning each, the rest copied; the dataset itself is refused."""
    with h5py.File(tmp_path / "f.h5", "w") as f:
        for name, target in (("a", "/b"), ("b", "/a"), ("self", "/self")):
            f[name] = h5py.SoftLink(target)
        f["d"] = np.arange(3)
        f.create_group("g")["up"] = f["/"]
        f["refs"] = np.array([f["d"].ref], dtype=h5py.ref_dtype)
        f.create_dataset("empty", data=h5py.Empty("f4"))
    with h5py.File(tmp_path / "f.h5", "r") as f:
        with pytest.warns(UserWarning) as w:
            g = cs.copy(f, str(tmp_path / "o.zarr"))
        with pytest.raises(TypeError, match="'/refs': its values"):
            cs.copy(f["refs"], str(tmp_path / "r.zarr"))
    file = tmp_path / "f.h5"
    assert sorted(str(x.message) for x in w) == sorted([
        f"{file}: group '/': member 'a' skipped: a link to nothing",
        f"{file}: group '/': member 'b' skipped: a link to nothing",
        f"{file}: group '/': member 'self' skipped: a link to nothing",
        f"{file}: group '/g': member 'up' skipped: a link to a group that holds it",
        f"{file}: dataset '/refs': its values (HDF5 object references or variable-length "
        "sequences) have no Zarr data type; skipped",
        f"{file}: dataset '/empty': an empty HDF5 dataset (no shape), which Zarr cannot "
        "hold; skipped"])
    assert sorted(g.array_keys()) == ["d"] and sorted(g.group_keys()) == ["g"]
    assert not (tmp_path / "r.zarr").exists()


def test_netcdf_c_names(tmp_path):
    """netCDF-C keeps a variable named like a dimension it is not the coordinate of as
    ``_nc4_non_coord_<name>`` beside a dimension-only dataset ``<name>``."""
    with h5py.File(tmp_path / "c.nc", "w") as f:
        f.attrs["_NCProperties"] = np.bytes_(b"version=2,netcdf=4.9.2")
        n = f.create_dataset("n", shape=(2,), dtype="f4")
        n.make_scale("This is a netCDF dimension but not a netCDF variable.         2")
        x = f.create_dataset("_nc4_non_coord_x", data=np.array([7, 8], "i2"))
        x.dims[0].attach_scale(n)
        x.attrs["valid_min"] = np.array([0], "i2")  # netCDF-C: a length-1 array
    with h5py.File(tmp_path / "c.nc", "r") as f:
        g = cs.copy(f, str(tmp_path / "o.zarr"))
    assert list(g.array_keys()) == ["x"] and dict(g.attrs) == {}
    assert g["x"].dimension_names == ("n",) and dict(g["x"].attrs) == {"valid_min": 0}
    np.testing.assert_array_equal(g["x"][:], [7, 8])


def _translated_file(path):
    with h5py.File(path, "w") as f:
        f.attrs["title"] = np.bytes_(b"bytes title")
        f.attrs["nan"] = np.float32(np.nan)
        y = f.create_dataset("y", data=[1.0, 2.0])
        y.make_scale("y")
        d = f.create_dataset("v", data=np.arange(6, dtype="i4").reshape(2, 3), chunks=(1, 3))
        d.dims[0].attach_scale(y)
        d.dims[1].label = "x"
        d.attrs["_FillValue"] = np.array([-1], "i4")
        d.attrs["one"] = np.array([1.5])
        d.attrs["two"] = np.array([1, 2], "i2")
        d.attrs["names"] = np.array([b"a", b"bc"])
        d.attrs["ref"] = f["y"].ref
        d.attrs["cplx"] = np.complex64(1 + 2j)
        d.attrs["latin"] = np.bytes_(b"caf\xe9")
        d.attrs["inf"] = np.array([1.0, -np.inf])
        d.attrs["empty"] = h5py.Empty("f4")
        d.attrs["_Netcdf4Dimid"] = np.int32(0)
        s = f.create_dataset("s", data=np.array(["ab", "βγ"], dtype=h5py.string_dtype()))
        s.dims[0].attach_scale(y)
    return path


def _zattrs(path) -> dict:
    doc = json.loads((path / "zarr.json").read_text()) if (path / "zarr.json").exists() else {}
    if doc:
        return doc["attributes"]
    return json.loads((path / ".zattrs").read_text())


@pytest.mark.parametrize("fmt", [3, 2])
def test_metadata_is_translated(tmp_path, fmt):
    src = _translated_file(tmp_path / "t.h5")
    out = tmp_path / "o.zarr"
    with h5py.File(src, "r") as f, pytest.warns(UserWarning) as w:
        g = cs.copy(f, str(out), zarr_format=fmt)
    where = f"{src}: dataset '/v': attribute"
    assert sorted(str(x.message) for x in w) == [
        f"{where} 'cplx' skipped: a complex64 value, which has no JSON form",
        f"{where} 'latin' skipped: bytes that are not UTF-8 text",
        f"{where} 'ref' skipped: an HDF5 object reference, which has no JSON form"]
    v = g["v"]
    np.testing.assert_array_equal(v[:], np.arange(6).reshape(2, 3))
    assert v.chunks == (1, 3) and v.fill_value == -1
    expected = {"one": 1.5, "two": [1, 2], "names": ["a", "bc"], "empty": [],
                "inf": [1.0, -np.inf]}
    if fmt == 3:
        assert v.dimension_names == ("y", "x") and g["y"].dimension_names == ("y",)
        expected["_FillValue"] = -1
    else:
        expected["_ARRAY_DIMENSIONS"] = ["y", "x"]
        assert g["y"].fill_value is None  # no _FillValue: nothing masked
    assert dict(v.attrs) == expected
    assert g["s"][:].tolist() == ["ab", "βγ"]
    assert g.attrs["title"] == "bytes title" and np.isnan(g.attrs["nan"])
    # NaN and infinities as zarr-python writes them: bare in the JSON
    assert '"nan": NaN' in ((out / "zarr.json") if fmt == 3 else (out / ".zattrs")).read_text()
    assert _zattrs(out / "v")["inf"] == [1.0, -np.inf]


def test_float_fill_value_is_xarrays_in_v3(tmp_path):
    with h5py.File(tmp_path / "f.h5", "w") as f:
        d = f.create_dataset("d", data=np.array([1.0, np.nan], "f4"))
        d.attrs["_FillValue"] = np.array([np.nan], "f4")
        a = cs.copy(d, str(tmp_path / "o.zarr"))
    assert np.isnan(a.fill_value)
    assert a.attrs["_FillValue"] == "AAAAAAAA+H8="  # float64 NaN, base64, as xarray writes it


@pytest.mark.parametrize("entry", ["array", "from_array", "setitem", "create_array"])
@pytest.mark.parametrize("kind", ["external storage", "virtual dataset"])
def test_every_entry_that_stores_a_dataset_checks_it(dirs, tmp_path, kind, entry):
    """Not only copy and convert: an h5py dataset given as data to any entry point is
    refused when its bytes are in another file, and nothing of that file is written."""
    inside, outside = dirs
    path, _ = _evil_files(inside, outside)[kind]
    out = str(tmp_path / "o.zarr")
    with h5py.File(path, "r") as f:
        dset = f["x"]
        with pytest.raises(ExternalDataError, match="dataset '/x'"):
            if entry == "array":
                cs.array(dset)
            elif entry == "from_array":
                cs.from_array(out, data=dset)
            elif entry == "create_array":
                cs.group(out).create_array("y", data=dset)
            else:
                a = cs.create_array(out, shape=dset.shape, dtype=dset.dtype)
                a[:] = dset
    for dirpath, _, names in os.walk(out):
        for name in names:
            with open(os.path.join(dirpath, name), "rb") as fh:
                assert SECRET not in fh.read()
