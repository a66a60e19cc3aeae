# SPDX-License-Identifier: Apache-2.0
"""kvport.lmcache_cpu against vLLM's CPU KV layout: the cache a block is in is written by vLLM's
own kernel (cpu_attn_reshape_and_cache, with the kernel vLLM's CPU backend picks for the dtype,
block size and this machine), and every copy is compared with it, in both directions, element
for element. LMCache's memory objects come from LMCache's own allocator."""

from __future__ import annotations

import pytest
import torch

from lmcache.utils import EngineType
from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.memory_management import MemoryFormat
from lmcache.v1.memory_allocators.ad_hoc_memory_allocator import AdHocMemoryAllocator
from vllm import _custom_ops as ops
from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

import lmcache.v1.gpu_connector as lmcache_connectors
from kvport import lmcache_cpu

LAYERS, HEADS, HEAD_SIZE, BLOCKS = 3, 2, 64, 6
GEOMETRIES = [(torch.float32, 32), (torch.float32, 128), (torch.bfloat16, 32),
              (torch.bfloat16, 128), (torch.float16, 64)]


def vllm_cache(dtype, block_size, keys=None, values=None, slots=None):
    """LAYERS layers of vLLM's CPU cache, zero, or with keys/values [LAYERS, T, HEADS,
    HEAD_SIZE] written at slots by vLLM's kernel, as the attention backend writes them."""
    layers = [torch.zeros(BLOCKS, HEADS, block_size, 2 * HEAD_SIZE, dtype=dtype)
              for _ in range(LAYERS)]
    if keys is not None:
        isa = _get_attn_isa(dtype, block_size, HEAD_SIZE)
        for layer, k, v in zip(layers, keys, values):
            kc, vc = layer.view(BLOCKS, HEADS, 2 * block_size, HEAD_SIZE).chunk(2, dim=2)
            ops.cpu_attn_reshape_and_cache(k, v, kc, vc, slots, isa)
    return layers


def random_tokens(dtype, count, seed):
    generator = torch.Generator().manual_seed(seed)
    shape = (LAYERS, count, HEADS, HEAD_SIZE)
    return (torch.randn(shape, generator=generator).to(dtype),
            torch.randn(shape, generator=generator).to(dtype))


def memory_object(dtype, count):
    return AdHocMemoryAllocator("cpu").allocate(
        torch.Size([2, LAYERS, count, HEADS * HEAD_SIZE]), dtype, MemoryFormat.KV_2LTD)


def as_kv(memory_obj, count):
    """[2, LAYERS, T, HEADS, HEAD_SIZE] of a KV_2LTD object (the format LMCache's GPU copies
    use: keys then values, per layer, per token, heads then head elements)."""
    return memory_obj.tensor.view(2, LAYERS, count, HEADS, HEAD_SIZE)


@pytest.mark.parametrize("dtype,block_size", GEOMETRIES)
def test_from_vllm_cache_reads_the_tokens_vllm_wrote(dtype, block_size):
    count = 2 * block_size + 7  # whole blocks and a part of one, scattered over the cache
    slots = torch.randperm(BLOCKS * block_size, generator=torch.Generator().manual_seed(1))
    slots = slots[:count]
    keys, values = random_tokens(dtype, count, seed=2)
    layers = vllm_cache(dtype, block_size, keys, values, slots)
    copy = lmcache_cpu.VLLMCPUPagedCopy(LAYERS, HEADS, HEAD_SIZE, dtype)
    obj = memory_object(dtype, count - 5)
    copy.batched_from_gpu([obj], [5], [count], kvcaches=layers,
                          slot_mapping=torch.cat([torch.full((5,), -1), slots[5:]]))
    assert torch.equal(as_kv(obj, count - 5)[0], keys[:, 5:])
    assert torch.equal(as_kv(obj, count - 5)[1], values[:, 5:])


def blocks_and_strays(block_size):
    """Slots of 7 tokens of block 0 out of order, then whole blocks 4, 1 and 2 in order (two
    runs: 4, then 1-2), then block 5 backwards: copied by whole blocks and token by token."""
    generator = torch.Generator().manual_seed(8)
    strays = torch.randperm(block_size, generator=generator)[:7]
    whole = [torch.arange(block_size) + block * block_size for block in (4, 1, 2)]
    backwards = torch.arange(block_size).flip(0) + 5 * block_size
    return torch.cat([strays] + whole + [backwards])


def stored_blocks_and_strays(dtype, block_size, seed):
    """A copy that has stored blocks_and_strays() of vLLM's cache into a memory object, and
    loaded that object into an empty cache at the same slots: the copy, whether the object holds
    the keys and the values vLLM's kernel wrote, and whether the cache it loaded is the cache
    vLLM's kernel wrote."""
    slots = blocks_and_strays(block_size)
    count = slots.numel()
    keys, values = random_tokens(dtype, count, seed)
    layers = vllm_cache(dtype, block_size, keys, values, slots)
    copy = lmcache_cpu.VLLMCPUPagedCopy(LAYERS, HEADS, HEAD_SIZE, dtype)
    obj = memory_object(dtype, count)
    copy.from_gpu(obj, 0, count, kvcaches=layers, slot_mapping=slots)
    stored = (torch.equal(as_kv(obj, count)[0], keys), torch.equal(as_kv(obj, count)[1], values))
    loaded = vllm_cache(dtype, block_size)
    copy.to_gpu(obj, 0, count, kvcaches=loaded, slot_mapping=slots)
    return copy, stored, all(torch.equal(a, b) for a, b in zip(loaded, layers))


@pytest.mark.parametrize("dtype,block_size", GEOMETRIES)
def test_whole_blocks_and_strays_are_copied_both_ways(dtype, block_size):
    copy, stored, loaded = stored_blocks_and_strays(dtype, block_size, seed=9)
    assert copy.strided[block_size] is not None  # each vLLM kernel's layout is a strided view
    assert stored == (True, True)
    assert loaded


def test_a_layout_that_is_no_strided_view_is_copied_token_by_token(monkeypatch):
    monkeypatch.setattr(lmcache_cpu, "_strides", lambda layout, element_size: None)
    copy, stored, loaded = stored_blocks_and_strays(torch.bfloat16, 32, seed=10)
    assert copy.strided[32] is None
    assert stored == (True, True)
    assert loaded


def test_strides_finds_a_strided_layout_and_refuses_a_scattered_one():
    # [2, 4, 3]: the second dimension in pairs that are adjacent, the third between them
    k, t, h = torch.arange(2).view(2, 1, 1), torch.arange(4).view(1, 4, 1), torch.arange(3)
    layout = k * 12 + t // 2 * 6 + t % 2 + h * 2
    sizes, strides, offset, lanes = lmcache_cpu._strides(layout, 4)
    assert torch.equal(torch.arange(24).as_strided(sizes, strides, offset).reshape(2, 4, 3),
                       layout)
    assert lanes == 1
    scattered = torch.randperm(24, generator=torch.Generator().manual_seed(11)).view(2, 4, 3)
    assert lmcache_cpu._strides(scattered, 4) is None


@pytest.mark.parametrize("dtype,block_size", GEOMETRIES)
def test_to_vllm_cache_writes_what_vllms_kernel_writes(dtype, block_size):
    count = block_size + 9
    slots = torch.randperm(BLOCKS * block_size, generator=torch.Generator().manual_seed(3))
    slots = slots[:count]
    keys, values = random_tokens(dtype, count, seed=4)
    expected = vllm_cache(dtype, block_size, keys, values, slots)
    obj = memory_object(dtype, count)
    as_kv(obj, count)[0] = keys
    as_kv(obj, count)[1] = values
    layers = vllm_cache(dtype, block_size)
    copy = lmcache_cpu.VLLMCPUPagedCopy(LAYERS, HEADS, HEAD_SIZE, dtype)
    copy.batched_to_gpu([obj], [0], [count], kvcaches=layers, slot_mapping=slots)
    for got, want in zip(layers, expected):
        assert torch.equal(got, want)


@pytest.mark.parametrize("first_slot,count,held", [(3, 40, 11), (0, 96, 40)])
def test_to_vllm_cache_leaves_the_tokens_vllm_holds_alone(first_slot, count, held):
    # (3, 40, 11): no whole block; (0, 96, 40): block 1 partly held, block 2 whole
    dtype, block_size = torch.bfloat16, 32
    slots = torch.arange(count) + first_slot
    keys, values = random_tokens(dtype, count, seed=5)
    obj = memory_object(dtype, count)
    as_kv(obj, count)[0] = keys
    as_kv(obj, count)[1] = values
    layers = vllm_cache(dtype, block_size)
    copy = lmcache_cpu.VLLMCPUPagedCopy(LAYERS, HEADS, HEAD_SIZE, dtype)
    copy.to_gpu(obj, 0, count, kvcaches=layers, slot_mapping=slots, vllm_cached_tokens=held)
    expected = vllm_cache(dtype, block_size, keys[:, held:], values[:, held:], slots[held:])
    for got, want in zip(layers, expected):
        assert torch.equal(got, want)


def test_a_round_trip_through_a_memory_object_restores_another_cache():
    dtype, block_size, count = torch.bfloat16, 128, 256
    slots = torch.arange(count) + 2 * block_size
    keys, values = random_tokens(dtype, count, seed=6)
    source = vllm_cache(dtype, block_size, keys, values, slots)
    copy = lmcache_cpu.VLLMCPUPagedCopy(LAYERS, HEADS, HEAD_SIZE, dtype)
    objs = [memory_object(dtype, 128), memory_object(dtype, 128)]
    copy.batched_from_gpu(objs, [0, 128], [128, 256], kvcaches=source, slot_mapping=slots)
    target_slots = torch.arange(count)  # other blocks of another engine's cache
    target = vllm_cache(dtype, block_size)
    copy.batched_to_gpu(objs, [0, 128], [128, 256], kvcaches=target, slot_mapping=target_slots)
    expected = vllm_cache(dtype, block_size, keys, values, target_slots)
    for got, want in zip(target, expected):
        assert torch.equal(got, want)


@pytest.mark.parametrize("slot", [-1, BLOCKS * 32])
def test_a_slot_outside_the_cache_is_refused(slot):
    dtype = torch.float32
    layers = vllm_cache(dtype, 32)
    before = [layer.clone() for layer in layers]
    obj = memory_object(dtype, 4)
    copy = lmcache_cpu.VLLMCPUPagedCopy(LAYERS, HEADS, HEAD_SIZE, dtype)
    slots = torch.tensor([0, 1, slot, 3])
    with pytest.raises(ValueError, match="leaves the cache"):
        copy.to_gpu(obj, 0, 4, kvcaches=layers, slot_mapping=slots)
    with pytest.raises(ValueError, match="leaves the cache"):
        copy.from_gpu(obj, 0, 4, kvcaches=layers, slot_mapping=slots)
    assert all(torch.equal(a, b) for a, b in zip(layers, before))


def test_another_layout_or_object_is_refused():
    dtype = torch.float32
    copy = lmcache_cpu.VLLMCPUPagedCopy(LAYERS, HEADS, HEAD_SIZE, dtype)
    obj = memory_object(dtype, 4)
    slots = torch.arange(4)
    nhd = [torch.zeros(BLOCKS, 32, HEADS, 2 * HEAD_SIZE) for _ in range(LAYERS)]
    with pytest.raises(ValueError, match="not vLLM's CPU KV layout"):
        copy.from_gpu(obj, 0, 4, kvcaches=nhd, slot_mapping=slots)
    with pytest.raises(ValueError, match="KV cache layers"):
        copy.from_gpu(obj, 0, 4, kvcaches=vllm_cache(dtype, 32)[:2], slot_mapping=slots)
    with pytest.raises(ValueError, match="memory object"):
        copy.from_gpu(memory_object(dtype, 5), 0, 4, kvcaches=vllm_cache(dtype, 32),
                      slot_mapping=slots)
    with pytest.raises(ValueError, match="memory object"):
        copy.from_gpu(memory_object(torch.bfloat16, 4), 0, 4, kvcaches=vllm_cache(dtype, 32),
                      slot_mapping=slots)


class Metadata:
    kv_shape = (LAYERS, 2, 256, HEADS, HEAD_SIZE)
    kv_dtype = torch.bfloat16
    use_mla = False


def config(**overrides):
    return LMCacheEngineConfig.from_defaults(chunk_size=256, **overrides)


def test_install_gives_lmcache_the_copy_for_vllm_on_the_cpu_only():
    original = lmcache_connectors.CreateGPUConnector
    try:
        first, again = lmcache_cpu.install(), lmcache_cpu.install()
        assert (first, again) == (original is not lmcache_cpu._create, False)
        created = lmcache_connectors.CreateGPUConnector(config(), Metadata(), EngineType.VLLM)
        assert isinstance(created, lmcache_cpu.VLLMCPUPagedCopy)
        assert created.get_shape(256) == torch.Size([2, LAYERS, 256, HEADS * HEAD_SIZE])
        # Another engine is LMCache's own business (its mock copy here).
        mock = lmcache_connectors.CreateGPUConnector(config(), Metadata(), EngineType.MOCK)
        assert not isinstance(mock, lmcache_cpu.VLLMCPUPagedCopy)
        with pytest.raises(ValueError, match="use_layerwise"):
            lmcache_connectors.CreateGPUConnector(config(use_layerwise=True), Metadata(),
                                                  EngineType.VLLM)
    finally:
        lmcache_connectors.CreateGPUConnector = original
