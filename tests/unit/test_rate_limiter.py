"""The rate limiter's refusal memo: a refusal DynamoDB made is repeated in its window without a call."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from nimbus_core.domain.limiter import RateLimiter, RefusalMemo
from nimbus_core.domain.ports import CounterState
from nimbus_core.domain.ratelimits import LOGIN
from nimbus_core.http.responses import rate_limit_headers
from tests.fakes import FakeCounters, FakeDb

NOW = 1_800_000_000.25


def limiter_on(db: FakeDb, memo: RefusalMemo | None = None) -> RateLimiter:
    return RateLimiter(FakeCounters(db), memo=memo or RefusalMemo(size=100))


def store_hits(db: FakeDb) -> int:
    return db.calls.count("counters.hit")


def exhaust(limiter: RateLimiter, subject: str, now: float = NOW) -> None:
    for _ in range(LOGIN.limit):
        assert limiter.hit(LOGIN, subject, now).state.allowed


def test_the_first_refusal_comes_from_the_store() -> None:
    db = FakeDb()
    limiter = limiter_on(db)
    exhaust(limiter, "192.0.2.1")

    refused = limiter.hit(LOGIN, "192.0.2.1", NOW + 1)

    assert not refused.state.allowed
    assert store_hits(db) == LOGIN.limit + 1


def test_a_memoised_refusal_makes_no_store_call_and_answers_the_same_window() -> None:
    db = FakeDb()
    limiter = limiter_on(db)
    exhaust(limiter, "192.0.2.1")
    from_store = limiter.hit(LOGIN, "192.0.2.1", NOW + 1).state
    calls = store_hits(db)

    later = NOW + 30
    memoised = limiter.hit(LOGIN, "192.0.2.1", later).state
    # What the store itself answers at that moment, asked through a limiter without a memo.
    direct = RateLimiter(FakeCounters(db), memo=RefusalMemo(size=0)).hit(LOGIN, "192.0.2.1", later).state

    assert store_hits(db) == calls + 1  # the direct one only
    assert memoised == from_store == direct
    assert rate_limit_headers(memoised, later) == rate_limit_headers(direct, later)
    assert memoised.reset_in(later) == direct.reset_in(later)


def test_a_new_window_is_counted_by_the_store_again() -> None:
    db = FakeDb()
    limiter = limiter_on(db)
    exhaust(limiter, "192.0.2.1")
    refused = limiter.hit(LOGIN, "192.0.2.1", NOW + 1).state
    calls = store_hits(db)

    fresh = limiter.hit(LOGIN, "192.0.2.1", refused.reset_at).state

    assert fresh.allowed
    assert fresh.count == 1
    assert store_hits(db) == calls + 1


def test_other_subjects_are_counted_while_one_is_refused_from_the_memo() -> None:
    db = FakeDb()
    limiter = limiter_on(db)
    exhaust(limiter, "192.0.2.1")
    limiter.hit(LOGIN, "192.0.2.1", NOW)

    other = limiter.hit(LOGIN, "198.51.100.7", NOW).state

    assert other.allowed
    assert other.count == 1


def test_a_memoised_refusal_gives_nothing_back() -> None:
    db = FakeDb()
    limiter = limiter_on(db)
    exhaust(limiter, "192.0.2.1")
    limiter.hit(LOGIN, "192.0.2.1", NOW)
    memoised = limiter.hit(LOGIN, "192.0.2.1", NOW + 1)
    before = dict(db.counters)

    state = limiter.give_back(memoised)

    assert state == memoised.state
    assert db.counters == before
    assert "counters.release" not in db.calls


def test_a_hit_given_back_on_this_instance_lets_the_store_decide_again() -> None:
    db = FakeDb()
    limiter = limiter_on(db)
    for _ in range(LOGIN.limit - 1):
        limiter.hit(LOGIN, "192.0.2.1", NOW)
    last = limiter.hit(LOGIN, "192.0.2.1", NOW)
    assert not limiter.hit(LOGIN, "192.0.2.1", NOW).state.allowed  # memoised now

    limiter.give_back(last)  # a "not counted" answer (404 at login) reopens one place

    assert limiter.hit(LOGIN, "192.0.2.1", NOW + 1).state.allowed


def test_exactly_limit_get_through_concurrently_with_the_memo_on() -> None:
    db = FakeDb()
    limiter = limiter_on(db)
    with ThreadPoolExecutor(max_workers=16) as pool:
        states = list(pool.map(lambda i: limiter.hit(LOGIN, "192.0.2.1", NOW + i / 1000).state, range(200)))

    assert sum(state.allowed for state in states) == LOGIN.limit
    assert store_hits(db) < 200  # refusals after the first are repeated from the memo


def test_the_memo_is_bounded_and_forgets_the_least_recently_refused() -> None:
    memo = RefusalMemo(size=3)
    state = CounterState(False, 4, 4, int(NOW) + 300)
    for key in ("a", "b", "c"):
        memo.remember(key, state)
    assert memo.refusal("a", NOW) == state  # "a" is now the most recent

    memo.remember("d", state)

    assert len(memo) == 3
    assert memo.refusal("b", NOW) is None
    assert memo.refusal("a", NOW) == state


def test_a_refusal_whose_window_ended_is_not_repeated() -> None:
    memo = RefusalMemo(size=3)
    memo.remember("a", CounterState(False, 4, 4, int(NOW) + 300))

    assert memo.refusal("a", NOW + 300) is None
    assert len(memo) == 0


def test_a_cleared_memo_asks_the_store_again() -> None:
    db = FakeDb()
    memo = RefusalMemo(size=100)
    limiter = RateLimiter(FakeCounters(db), memo=memo)
    exhaust(limiter, "192.0.2.1")
    assert not limiter.hit(LOGIN, "192.0.2.1", NOW).state.allowed
    db.counters.clear()  # the counters put back as they were before (a test's restored tables)

    memo.clear()

    assert limiter.hit(LOGIN, "192.0.2.1", NOW).state.allowed
    assert len(memo) == 0
