"""The runtime from Python: devices, tensors, streams and points, with
NumPy arrays in and out."""

import numpy as np
import pytest

import baton


@pytest.fixture(scope="module")
def two():
    return baton.devices("cpu:0,cpu:1", threads=1)


@pytest.mark.parametrize("dtype,numpy_dtype", [("f32", np.float32), ("f16", np.float16), ("i32", np.int32)])
def test_arrays_round_trip_through_a_stream(two, dtype, numpy_dtype):
    device = two[0]
    data = (np.arange(24).reshape(2, 3, 4) - 7).astype(numpy_dtype)
    tensor = device.tensor(dtype, [2, 3, 4])
    assert (tensor.dtype, tensor.shape, tensor.nbytes) == (dtype, [2, 3, 4], data.nbytes)
    stream = device.stream()
    written = stream.write(tensor, data)
    back = stream.read(tensor).wait(timeout=30)
    assert written.is_reached(), "a read after a write on one stream comes after it"
    assert back.dtype == numpy_dtype and back.shape == (2, 3, 4)
    np.testing.assert_array_equal(back, data)


def test_work_on_one_device_feeds_another_through_points(two):
    d0, d1 = two
    s0, s1 = d0.stream(), d1.stream()
    x, doubled = d0.tensor("f32", [8]), d0.tensor("f32", [8])
    y, total = d1.tensor("f32", [8]), d1.tensor("f32", [8])
    data = np.linspace(-1, 1, 8, dtype=np.float32)
    s0.write(x, data)
    done = s0.scale(x, doubled, 2.0)
    # Device 1's stream waits for device 0's point, not the host.
    copied = s1.copy(doubled, y, after=done)
    s1.add(y, y, total)
    result = s1.read(total).wait()
    np.testing.assert_array_equal(result, data * 4)
    copied.wait(timeout=0)
    assert done.is_reached() and copied.is_reached()
    assert copied.value >= 1


def test_a_stream_waits_on_another_streams_point(two):
    d0 = two[0]
    s0, s1 = d0.stream(), d0.stream()
    a, b = d0.tensor("f32", [3]), d0.tensor("f32", [3])
    point = s0.write(a, np.array([1, 2, 3], dtype=np.float32))
    s1.wait(point)
    s1.scale(a, b, -1.0)
    s1.synchronize()
    np.testing.assert_array_equal(s1.read(b).wait(), [-1, -2, -3])


def test_bytes_fill_tensors_of_any_type(two):
    device = two[0]
    blocks = device.tensor("q8_0", [64])
    raw = bytes(range(blocks.nbytes))
    stream = device.stream()
    stream.write(blocks, raw)
    assert stream.read(blocks).wait() == raw


def test_misuse_is_a_clear_error(two):
    d0, d1 = two
    stream = d0.stream()
    f32 = d0.tensor("f32", [4])
    other = d0.tensor("f32", [5])
    cases = [
        (lambda: baton.devices("gpu:9"), ValueError, "unknown device"),
        (lambda: baton.devices(""), ValueError, "empty"),
        (lambda: baton.devices("cpu", threads=0), ValueError, "threads"),
        (lambda: d0.tensor("f99", [4]), ValueError, "dtype"),
        (lambda: stream.write(f32, np.zeros(5, dtype=np.float32)), ValueError, "bytes"),
        (lambda: stream.write(f32, np.zeros(4, dtype=np.float64)), TypeError, "float64"),
        (lambda: stream.write(f32, [1.0, 2.0, 3.0, 4.0]), TypeError, "NumPy array or bytes"),
        (lambda: stream.copy(f32, other), baton.StreamError, "bytes"),
        (lambda: stream.scale(f32, other, 2.0), ValueError, "one shape"),
        (lambda: stream.read(f32).wait(timeout=-1), ValueError, "timeout"),
    ]
    for make, error, fragment in cases:
        with pytest.raises(error, match=fragment):
            make()
    read = stream.read(f32)
    read.wait()
    with pytest.raises(ValueError, match="already taken"):
        read.wait()
    # The stream still works after every refusal.
    stream.write(f32, np.ones(4, dtype=np.float32))
    np.testing.assert_array_equal(stream.read(f32).wait(), np.ones(4))
