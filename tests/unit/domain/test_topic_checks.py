"""``check_topics`` checks a whole table at once when every topic is storable and listed once,
and topic by topic otherwise: whichever way it goes, it keeps and drops exactly what the
topic-by-topic check does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nsfleet.domain import model, validation
from nsfleet.domain.model import TopicConfig, check_topics

# Names near every rule: storable ones, ones with a space (the whole-table check's separator)
# or " @" inside, and every kind of unstorable name.
NAMES = st.one_of(
    st.sampled_from(["TopicA", "TopicB", "a b", "a @b", "%RETRY%g", "x|y", "", "*", "@t", "a,b",
                     "tab\there", "del\x7f", "x" * validation.REGISTERED_TOPIC_MAX_LEN,
                     "x" * (validation.REGISTERED_TOPIC_MAX_LEN + 1)]),
    st.text(min_size=0, max_size=12),
)
NUMBERS = st.one_of(st.integers(0, 1024),
                    st.sampled_from([validation.JAVA_INT_MIN, validation.JAVA_INT_MAX,
                                     validation.JAVA_INT_MIN - 1, validation.JAVA_INT_MAX + 1]))
CONFIGS = st.builds(TopicConfig, NAMES, NUMBERS, NUMBERS, NUMBERS, NUMBERS)


@settings(max_examples=400)
@given(st.lists(CONFIGS, max_size=8))
def test_a_table_is_checked_as_topic_by_topic(configs: list[TopicConfig]) -> None:
    assert check_topics(configs) == model._check_each(configs)


def test_a_storable_table_is_kept_whole_in_order() -> None:
    configs = [TopicConfig(f"T{i}", 8, 8, 6) for i in range(1000)] + [TopicConfig("a @b")]
    checked = check_topics(configs)
    assert checked.kept == configs and checked.dropped == [] and checked.sent == 1001


def test_one_unstorable_topic_is_dropped_alone() -> None:
    configs = [TopicConfig(f"T{i}") for i in range(100)] + [TopicConfig("bad,name")]
    checked = check_topics(configs)
    assert checked.kept == configs[:100]
    assert [d.topic for d in checked.dropped] == ["bad,name"]
