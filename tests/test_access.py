import pytest

from omniroute.memory.access import AccessRecorder
from tests.helpers import eventually

pytestmark = pytest.mark.both_stores


def test_accesses_are_gathered_and_written_together(store):
    memory, _ = store.create(api_key_id="alice", key="k", content="c")
    other, _ = store.create(api_key_id="alice", key="j", content="d")
    recorder = AccessRecorder(store, interval=3600)
    recorder.record([memory.id, memory.id, other.id])
    recorder.record([memory.id])
    assert store.get(memory.id).access_count == 0, "nothing is written before a flush"
    recorder.flush()
    assert store.get(memory.id).access_count == 2
    assert store.get(other.id).access_count == 1
    recorder.flush()
    assert store.get(memory.id).access_count == 2, "a flush writes each count once"


def test_accesses_are_flushed_by_themselves_after_the_interval(store):
    memory, _ = store.create(api_key_id="alice", key="k", content="c")
    recorder = AccessRecorder(store, interval=0.05)
    recorder.record([memory.id])
    assert eventually(lambda: store.get(memory.id).access_count == 1, timeout=5)


def test_an_access_to_a_deleted_memory_is_dropped(store):
    memory, _ = store.create(api_key_id="alice", key="k", content="c")
    recorder = AccessRecorder(store, interval=3600)
    recorder.record([memory.id])
    store.delete(memory.id)
    recorder.flush()
    assert store.get(memory.id) is None
