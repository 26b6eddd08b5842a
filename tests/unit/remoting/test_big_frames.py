"""One connection at a time receives a big frame (nsfleet.remoting.big_frames): the others are
paused, resumed in the order they began, and a holder gives way after its slice."""

from __future__ import annotations

import asyncio

from nsfleet.remoting.big_frames import BigFrameSlots
from nsfleet.wire.codec import FrameDecoder
from tests.support.remoting_client import Command, encode


class Conn:
    def __init__(self, name: str) -> None:
        self.name = name
        self.big_slot = False
        self.paused = False
        self.resumes = 0

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self.resumes += 1

    def __repr__(self) -> str:
        return self.name


async def test_big_frames_are_received_one_at_a_time_in_the_order_they_began() -> None:
    slots = BigFrameSlots(slots=1, slice_s=60.0)
    a, b, c = Conn("a"), Conn("b"), Conn("c")
    for conn in (a, b, c):
        slots.admit(conn)
    assert (a.big_slot, a.paused) == (True, False)
    assert b.paused and c.paused and list(slots.waiting) == [b, c]
    slots.admit(a)  # more of a's frame: nothing changes
    slots.admit(b)  # b sends nothing while paused, but a second call changes nothing either
    assert list(slots.waiting) == [b, c]
    slots.release(a)
    assert (b.big_slot, b.paused, b.resumes) == (True, False, 1) and c.paused
    slots.release(b)
    assert c.big_slot and not c.paused and not slots.waiting
    slots.release(c)
    assert not slots.holders


async def test_a_waiting_connection_that_closes_leaves_the_queue() -> None:
    slots = BigFrameSlots(slots=1, slice_s=60.0)
    a, b, c = Conn("a"), Conn("b"), Conn("c")
    for conn in (a, b, c):
        slots.admit(conn)
    slots.release(b)  # closed while paused
    assert list(slots.waiting) == [c] and b.resumes == 0
    slots.release(a)
    assert c.big_slot and b.resumes == 0


async def test_a_holder_gives_way_after_its_slice_and_waits_behind() -> None:
    """A peer that begins a big frame and stops (or a slow link) delays the others by one
    slice, not for as long as it takes."""
    slots = BigFrameSlots(slots=1, slice_s=0.05)
    stalled, other = Conn("stalled"), Conn("other")
    slots.admit(stalled)
    slots.admit(other)
    for _ in range(200):
        if other.big_slot:
            break
        await asyncio.sleep(0.01)
    assert other.big_slot and not other.paused
    assert stalled.paused and not stalled.big_slot and list(slots.waiting) == [stalled]
    slots.release(other)
    assert stalled.big_slot and not stalled.paused


async def test_a_lone_holder_keeps_its_slot_past_its_slice() -> None:
    slots = BigFrameSlots(slots=1, slice_s=0.01)
    a = Conn("a")
    slots.admit(a)
    await asyncio.sleep(0.05)
    assert a.big_slot and not a.paused


def test_the_decoder_tells_the_size_of_the_frame_it_is_receiving() -> None:
    decoder = FrameDecoder()
    first = encode(Command(105, {"topic": "T"}, None, opaque=1))
    second = encode(Command(103, None, b"x" * 1000, opaque=2))
    assert decoder.feed(first[:3]) == [] and decoder.pending_frame_size == 0
    assert decoder.feed(first[3:6]) == [] and decoder.pending_frame_size == len(first)
    (done,) = decoder.feed(first[6:] + second[:500])
    assert done.opaque == 1 and decoder.pending_frame_size == len(second)
    (done,) = decoder.feed(second[500:])
    assert done.opaque == 2 and decoder.pending_frame_size == 0
