#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "sim/engine/event_queue.hpp"

using epsim::EventQueue;
using epsim::Time_ps;

TEST_CASE("EventQueue runs events in time order, equal times in scheduling order") {
  EventQueue q;
  std::vector<int> order;
  q.schedule(30, [&] { order.push_back(3); });
  q.schedule(10, [&] { order.push_back(1); });
  q.schedule(20, [&] { order.push_back(20); });
  q.schedule(10, [&] { order.push_back(2); });
  q.schedule(20, [&] { order.push_back(21); });
  CHECK(q.size() == 5);
  q.run();
  CHECK(order == std::vector<int>{1, 2, 20, 21, 3});
  CHECK(q.now_ps() == 30);
  CHECK(q.empty());
  CHECK(q.events_run() == 5);
  CHECK_FALSE(q.run_next());
}

TEST_CASE("EventQueue cancel removes a pending event once") {
  EventQueue q;
  std::vector<int> order;
  const auto a = q.schedule(5, [&] { order.push_back(1); });
  const auto b = q.schedule(6, [&] { order.push_back(2); });
  CHECK(q.pending(a));
  CHECK(q.cancel(a));
  CHECK_FALSE(q.pending(a));
  CHECK_FALSE(q.cancel(a));
  CHECK_FALSE(q.cancel(0));
  q.run();
  CHECK(order == std::vector<int>{2});
  CHECK_FALSE(q.pending(b));
  CHECK_FALSE(q.cancel(b));  // already ran
  CHECK(q.events_run() == 1);
}

TEST_CASE("EventQueue reschedule moves an event and gives it a fresh sequence number") {
  EventQueue q;
  std::vector<char> order;
  const auto a = q.schedule(10, [&] { order.push_back('a'); });
  q.schedule(10, [&] { order.push_back('b'); });
  const auto c = q.schedule(50, [&] { order.push_back('c'); });
  CHECK(q.reschedule(a, 10));  // same time, now behind b
  CHECK(q.reschedule(c, 5));   // earlier
  q.run();
  CHECK(order == std::vector<char>{'c', 'b', 'a'});
  CHECK_FALSE(q.reschedule(a, 100));  // already ran
}

TEST_CASE("EventQueue rejects times in the past") {
  EventQueue q;
  const auto later = q.schedule(100, [] {});
  q.schedule(50, [&] {
    CHECK_THROWS_AS(q.schedule(49, [] {}), std::logic_error);
    CHECK_THROWS_AS(q.reschedule(later, 10), std::logic_error);
    CHECK_NOTHROW(q.schedule(50, [] {}));  // now itself is fine
    CHECK(q.pending(later));
  });
  q.run();
  CHECK(q.now_ps() == 100);
  CHECK_THROWS_AS(q.schedule(100, nullptr), std::invalid_argument);
}

TEST_CASE("EventQueue actions may schedule, cancel and reschedule others") {
  EventQueue q;
  std::vector<std::pair<Time_ps, int>> log;
  EventQueue::Handle victim = 0;
  EventQueue::Handle mover = 0;
  q.schedule(1, [&] {
    log.emplace_back(q.now_ps(), 1);
    q.schedule_in(0, [&] { log.emplace_back(q.now_ps(), 2); });  // same time, after everything due
    q.cancel(victim);
    q.reschedule(mover, 3);
  });
  q.schedule(1, [&] { log.emplace_back(q.now_ps(), 10); });
  victim = q.schedule(2, [&] { log.emplace_back(q.now_ps(), 99); });
  mover = q.schedule(7, [&] { log.emplace_back(q.now_ps(), 3); });
  q.run();
  const std::vector<std::pair<Time_ps, int>> expected{{1, 1}, {1, 10}, {1, 2}, {3, 3}};
  CHECK(log == expected);
}

TEST_CASE("EventQueue handles stay stale after their slot is reused") {
  EventQueue q;
  const auto first = q.schedule(1, [] {});
  q.run();
  bool ran = false;
  const auto second = q.schedule(2, [&] { ran = true; });  // reuses the slot of `first`
  CHECK(first != second);
  CHECK_FALSE(q.cancel(first));
  CHECK_FALSE(q.reschedule(first, 5));
  CHECK(q.pending(second));
  q.run();
  CHECK(ran);
}

TEST_CASE("EventQueue matches a sorted reference under random schedule/cancel/reschedule") {
  // The reference keeps (time, sequence) -> id in a std::map; the heap must pop the same order.
  EventQueue q;
  std::map<std::pair<Time_ps, std::uint64_t>, int> reference;
  std::map<int, std::pair<EventQueue::Handle, std::pair<Time_ps, std::uint64_t>>> live;
  std::vector<int> popped;
  std::uint64_t seq = 0;
  std::uint64_t rng = 12345;
  const auto next = [&] {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return rng >> 33;
  };
  int next_id = 0;
  for (int step = 0; step < 4000; ++step) {
    const auto op = next() % 10;
    if (op < 5 || live.empty()) {
      const int id = next_id++;
      const Time_ps at = q.now_ps() + static_cast<Time_ps>(next() % 50);
      const auto h = q.schedule(at, [&popped, id] { popped.push_back(id); });
      live[id] = {h, {at, seq}};
      reference[{at, seq++}] = id;
    } else if (op < 7) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(next() % live.size()));
      CHECK(q.cancel(it->second.first));
      reference.erase(it->second.second);
      live.erase(it);
    } else if (op < 9) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(next() % live.size()));
      const Time_ps at = q.now_ps() + static_cast<Time_ps>(next() % 50);
      CHECK(q.reschedule(it->second.first, at));
      reference.erase(it->second.second);
      it->second.second = {at, seq};
      reference[{at, seq++}] = it->first;
    } else {
      REQUIRE(q.run_next());
      REQUIRE_FALSE(reference.empty());
      const auto expected = reference.begin();
      REQUIRE(popped.back() == expected->second);
      CHECK(q.now_ps() == expected->first.first);
      live.erase(expected->second);
      reference.erase(expected);
    }
    REQUIRE(q.size() == reference.size());
  }
  while (q.run_next()) {
    CHECK(popped.back() == reference.begin()->second);
    reference.erase(reference.begin());
  }
  CHECK(reference.empty());
}

TEST_CASE("EventQueue keeps scheduling order for a time scheduled from different instants") {
  // A, B and C are due at 1000 but scheduled at 0, 900 and 999: while time advances towards 1000
  // the earlier ones are regrouped with other events, and must still run first.
  EventQueue q;
  std::vector<char> order;
  q.schedule(1000, [&] { order.push_back('A'); });
  q.schedule(1001, [&] { order.push_back('z'); });
  q.schedule(900, [&] {
    q.schedule(1000, [&] { order.push_back('B'); });
    q.schedule(999, [&] { q.schedule(1000, [&] { order.push_back('C'); }); });
  });
  q.schedule(950, [&] { order.push_back('x'); });
  q.schedule(1000, [&] { order.push_back('D'); });  // scheduled at 0, after A
  q.run();
  CHECK(order == std::vector<char>{'x', 'A', 'D', 'B', 'C', 'z'});
}

TEST_CASE("EventQueue counts pending events through cancels and reschedules, and starts over when empty") {
  EventQueue q;
  const auto a = q.schedule(10, [] {});
  const auto b = q.schedule(20, [] {});
  CHECK(q.reschedule(a, 30));
  CHECK(q.reschedule(a, 15));
  CHECK(q.size() == 2);
  CHECK(q.cancel(b));
  CHECK(q.size() == 1);
  CHECK(q.cancel(a));
  CHECK(q.empty());
  // Only stale entries are left: nothing runs and time stays where it was.
  CHECK_FALSE(q.run_next());
  CHECK(q.now_ps() == 0);
  CHECK(q.events_run() == 0);
  std::vector<Time_ps> ran;
  q.schedule(5, [&] { ran.push_back(q.now_ps()); });
  q.schedule(0, [&] { ran.push_back(q.now_ps()); });
  q.run();
  CHECK(ran == std::vector<Time_ps>{0, 5});
}

TEST_CASE("EventQueue keeps the order of equal times when many moves leave stale entries behind") {
  // 20,000 moves of one event leave far more stale entries than live ones, so they are dropped in
  // a pass while events of the current instant are still queued: those must keep their order.
  EventQueue q;
  std::vector<int> order;
  EventQueue::Handle mover = 0;
  q.schedule(100, [&] {
    order.push_back(0);
    for (int k = 0; k < 20'000; ++k) CHECK(q.reschedule(mover, k % 2 == 0 ? 300 : 100));
  });
  for (int i = 1; i <= 5; ++i) q.schedule(100, [&order, i] { order.push_back(i); });
  mover = q.schedule(200, [&] { order.push_back(99); });
  for (int i = 6; i <= 8; ++i) q.schedule(100, [&order, i] { order.push_back(i); });
  CHECK(q.size() == 10);
  q.run();
  // The last move (k = 19,999, odd) put the mover at 100, behind everything already due then.
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 99});
  CHECK(q.events_run() == 10);
}

TEST_CASE("EventQueue orders events across the whole time range") {
  EventQueue q;
  std::vector<Time_ps> ran;
  const std::vector<Time_ps> times{epsim::kMaxTime_ps, 0, 1, (Time_ps{1} << 40) + 3, (Time_ps{1} << 40) + 2,
                                   epsim::kMaxTime_ps - 1, 2, Time_ps{1} << 59, 1};
  for (Time_ps t : times) q.schedule(t, [&] { ran.push_back(q.now_ps()); });
  q.run();
  CHECK(ran == std::vector<Time_ps>{0, 1, 1, 2, (Time_ps{1} << 40) + 2, (Time_ps{1} << 40) + 3, Time_ps{1} << 59,
                                    epsim::kMaxTime_ps - 1, epsim::kMaxTime_ps});
}

TEST_CASE("EventQueue matches a std::multimap under 200k random operations, actions scheduling too") {
  // The reference holds (time -> id); std::multimap inserts an equal key after those already there,
  // which is exactly scheduling order. Delays span many scales (0, a few ps, up to 2^40 ps) so that
  // entries cross many buckets, and events that run schedule, cancel and move others, some at now.
  EventQueue q;
  std::multimap<Time_ps, int> reference;
  std::map<int, std::pair<EventQueue::Handle, std::multimap<Time_ps, int>::iterator>> live;
  std::vector<int> popped;
  std::uint64_t rng = 987654321;
  const auto next = [&] {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return rng >> 33;
  };
  const auto delay = [&]() -> Time_ps {
    switch (next() % 4) {
      case 0: return 0;
      case 1: return static_cast<Time_ps>(next() % 8);
      case 2: return static_cast<Time_ps>(next() % 5000);
      default: return static_cast<Time_ps>(next() % (std::uint64_t{1} << 40));
    }
  };
  int next_id = 0;
  std::function<void()> schedule_one;
  const auto random_live = [&] {
    auto it = live.lower_bound(static_cast<int>(next() % static_cast<std::uint64_t>(next_id)));
    return it == live.end() ? live.begin() : it;
  };
  const auto mutate = [&](std::uint64_t op) {
    if (op < 5 || live.empty()) {
      schedule_one();
    } else if (op < 7) {
      const auto it = random_live();
      REQUIRE(q.cancel(it->second.first));
      reference.erase(it->second.second);
      live.erase(it);
    } else {
      const auto it = random_live();
      const Time_ps at = q.now_ps() + delay();
      REQUIRE(q.reschedule(it->second.first, at));
      reference.erase(it->second.second);
      it->second.second = reference.emplace(at, it->first);
    }
  };
  schedule_one = [&] {
    const int id = next_id++;
    const Time_ps at = q.now_ps() + delay();
    const auto h = q.schedule(at, [&, id] {
      popped.push_back(id);
      // An action that runs makes up to two more changes from inside run_next.
      for (std::uint64_t k = next() % 3; k > 0; --k) mutate(next() % 9);
    });
    live[id] = {h, reference.emplace(at, id)};
  };
  std::size_t checked = 0;
  const auto run_one = [&] {
    REQUIRE_FALSE(reference.empty());
    const auto expected = reference.begin();
    const int id = expected->second;
    const Time_ps at = expected->first;
    reference.erase(expected);
    live.erase(id);
    const std::size_t before = popped.size();
    REQUIRE(q.run_next());
    REQUIRE(popped.size() == before + 1);
    REQUIRE(popped[before] == id);
    REQUIRE(q.now_ps() == at);
    ++checked;
  };
  for (int step = 0; step < 200'000; ++step) {
    if (next() % 10 < 4 && !reference.empty()) {
      run_one();
    } else {
      mutate(next() % 10);
    }
    REQUIRE(q.size() == reference.size());
  }
  while (!reference.empty()) run_one();
  CHECK_FALSE(q.run_next());
  CHECK(checked > 50'000);
  CHECK(q.events_run() == checked);
}

TEST_CASE("EventQueue runs and releases actions too large to be held inline") {
  // A shared_ptr is not trivially copyable, and five pointers exceed 16 bytes: both go to the heap.
  EventQueue q;
  const auto token = std::make_shared<int>(7);
  std::vector<int> ran;
  q.schedule(2, [token, &ran] { ran.push_back(*token); });
  int a = 1, b = 2, c = 3, d = 4;  // (not const: a lambda must capture them, which makes it too large to hold inline)
  q.schedule(1, [&ran, &a, &b, &c, &d] { ran.push_back(a + b + c + d); });
  const auto cancelled = q.schedule(3, [token, &ran] { ran.push_back(-1); });
  CHECK(token.use_count() == 3);
  CHECK(q.cancel(cancelled));
  CHECK(token.use_count() == 2);  // released by the cancel, not when the slot is reused
  q.run();
  CHECK(ran == std::vector<int>{10, 7});
  CHECK(token.use_count() == 1);  // released once run
  {
    EventQueue pending_at_end;
    pending_at_end.schedule(5, [token] {});
    CHECK(token.use_count() == 2);
  }
  CHECK(token.use_count() == 1);  // released with the queue
}

TEST_CASE("EventQueue takes std::function and function pointers, and refuses empty ones") {
  EventQueue q;
  static int calls = 0;
  calls = 0;
  std::function<void()> counted = [] { ++calls; };
  q.schedule(1, counted);  // copied: the original stays usable
  q.schedule(2, std::move(counted));
  void (*pointer)() = [] { calls += 10; };
  q.schedule_in(3, pointer);
  q.run();
  CHECK(calls == 12);
  CHECK_THROWS_AS(q.schedule(5, std::function<void()>{}), std::invalid_argument);
  CHECK_THROWS_AS(q.schedule(5, static_cast<void (*)()>(nullptr)), std::invalid_argument);
  CHECK(q.empty());
}

TEST_CASE("EventQueue keeps scheduling order over many entries of one far-off time") {
  // 1,000 events at one time 2^20 ps ahead fill several chunks of a far-off bucket; events at
  // nearby times and moves of some of them are interleaved. Hand-worked order: by time, then by
  // the order of the schedule() or reschedule() calls.
  EventQueue q;
  std::vector<int> order;
  const Time_ps far_ps = Time_ps{1} << 20;
  std::vector<EventQueue::Handle> handles;
  for (int i = 0; i < 1000; ++i) {
    handles.push_back(q.schedule(far_ps, [&order, i] { order.push_back(i); }));
    if (i % 100 == 0) q.schedule(far_ps - 1, [&order, i] { order.push_back(-i - 1); });
  }
  // Moving i = 0, 10, 20, ... to the same time puts it behind all 1,000, in the order of the moves.
  for (int i = 0; i < 1000; i += 10) CHECK(q.reschedule(handles[static_cast<std::size_t>(i)], far_ps));
  q.run();
  std::vector<int> expected;
  for (int i = 0; i < 1000; i += 100) expected.push_back(-i - 1);
  for (int i = 0; i < 1000; ++i)
    if (i % 10 != 0) expected.push_back(i);
  for (int i = 0; i < 1000; i += 10) expected.push_back(i);
  CHECK(order == expected);
}

TEST_CASE("EventQueue drops the stale entries of far-off buckets and keeps the order of the rest") {
  // Events 2^17 to 2^18 ps ahead sit two levels up, where a split drops stale entries: 3,000
  // events, 2,000 of them moved once or twice (some to times already taken), checked against a
  // std::multimap (equal keys in insertion order, i.e. scheduling order).
  EventQueue q;
  std::multimap<Time_ps, int> reference;
  std::vector<std::pair<EventQueue::Handle, std::multimap<Time_ps, int>::iterator>> events;
  std::vector<int> popped;
  std::uint64_t rng = 4242;
  const auto next = [&] {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return rng >> 33;
  };
  const auto far_time = [&] { return (Time_ps{1} << 17) + static_cast<Time_ps>(next() % 2000) * 64; };
  for (int i = 0; i < 3000; ++i) {
    const Time_ps at = far_time();
    events.emplace_back(q.schedule(at, [&popped, i] { popped.push_back(i); }), reference.emplace(at, i));
  }
  for (int round = 0; round < 2; ++round) {
    for (int i = round; i < 3000; i += 3) {
      const Time_ps at = far_time();
      auto& [handle, where] = events[static_cast<std::size_t>(i)];
      REQUIRE(q.reschedule(handle, at));
      reference.erase(where);
      where = reference.emplace(at, i);
    }
  }
  q.run();
  std::vector<int> expected;
  for (const auto& [at, id] : reference) expected.push_back(id);
  CHECK(popped == expected);
}

TEST_CASE("EventQueue runs events scheduled at now after those already due then, in scheduling order") {
  // A, B and C are due at 10 from the start. A schedules X at now, moves C to now and schedules Y
  // and W at now; B cancels W; X schedules Z at now. The ones scheduled or moved at 10 while it is
  // now run after B, the last of those due at 10 before, in the order of the calls.
  EventQueue q;
  std::vector<char> order;
  EventQueue::Handle c = 0;
  EventQueue::Handle w = 0;
  q.schedule(10, [&] {
    order.push_back('A');
    q.schedule(10, [&] {
      order.push_back('X');
      q.schedule(q.now_ps(), [&] { order.push_back('Z'); });
    });
    CHECK(q.reschedule(c, 10));
    q.schedule(10, [&] { order.push_back('Y'); });
    w = q.schedule(10, [&] { order.push_back('W'); });
  });
  q.schedule(10, [&] {
    order.push_back('B');
    CHECK(q.cancel(w));
  });
  c = q.schedule(10, [&] { order.push_back('C'); });
  q.schedule(11, [&] { order.push_back('L'); });
  // Before anything runs now is 0: these run first, in their order.
  q.schedule(0, [&] { order.push_back('0'); });
  q.schedule_in(0, [&] { order.push_back('1'); });
  q.run();
  CHECK(order == std::vector<char>{'0', '1', 'A', 'B', 'X', 'C', 'Y', 'Z', 'L'});
  CHECK(q.events_run() == 9);
  CHECK(q.empty());
}

TEST_CASE("EventQueue's pass over stale entries, run by an event at now, leaves the events at now that already ran") {
  // A (at 10) schedules B1 and B2 at now. B1 runs first, and its slot is free while it runs: X,
  // which B1 schedules at now, takes it again, with the stamp B1's entry had. B1 then cancels 300
  // far-off events, so the stale entries pass twice the live ones plus 256 and are dropped in one
  // pass, while the events at now are part taken. B1's entry, which ran, must not come back: read
  // again it matches X's slot and stamp, and X runs before B2 (a pass that kept it ran A, B1, X, B2).
  EventQueue q;
  std::vector<char> order;
  std::vector<EventQueue::Handle> far;
  for (int i = 0; i < 300; ++i) far.push_back(q.schedule(1'000'000, [&] { order.push_back('F'); }));
  q.schedule(10, [&] {
    order.push_back('A');
    q.schedule(10, [&] {
      order.push_back('1');
      q.schedule(10, [&] { order.push_back('X'); });
      for (const EventQueue::Handle h : far) CHECK(q.cancel(h));
    });
    q.schedule(10, [&] { order.push_back('2'); });
  });
  q.run();
  CHECK(order == std::vector<char>{'A', '1', '2', 'X'});
  CHECK(q.events_run() == 4);
  CHECK(q.empty());
}

TEST_CASE("EventQueue keeps the order when the live entries of a far-off bucket end on a chunk boundary") {
  // 510 events at one far-off bucket's times fill two chunks of 255 entries; moving the second
  // 255 away leaves the live ones exactly one chunk when the bucket is reached and its stale
  // entries are dropped. Also with 765 and 1020, and with a few of the first moved to the end.
  for (int chunks = 2; chunks <= 4; ++chunks) {
    CAPTURE(chunks);
    EventQueue q;
    std::multimap<Time_ps, int> reference;
    std::vector<std::pair<EventQueue::Handle, std::multimap<Time_ps, int>::iterator>> events;
    std::vector<int> popped;
    const Time_ps far_ps = Time_ps{1} << 20;
    const int count = 255 * chunks;
    for (int i = 0; i < count; ++i) {
      const Time_ps at = far_ps + (i * 7919) % 600;  // times out of order, some equal
      events.emplace_back(q.schedule(at, [&popped, i] { popped.push_back(i); }), reference.emplace(at, i));
    }
    const auto move = [&](int i, Time_ps at) {
      auto& [handle, where] = events[static_cast<std::size_t>(i)];
      REQUIRE(q.reschedule(handle, at));
      reference.erase(where);
      where = reference.emplace(at, i);
    };
    for (int i = 255; i < count; ++i) move(i, (Time_ps{1} << 21) + i % 50);
    if (chunks == 4) {
      for (int i = 0; i < 255; i += 51) move(i, far_ps + 599);
    }
    q.run();
    std::vector<int> expected;
    for (const auto& [at, id] : reference) expected.push_back(id);
    CHECK(popped == expected);
  }
}

TEST_CASE("EventQueue takes out lone far-off entries, live or stale, in time and scheduling order") {
  // A wide layer keeps a few pending events far apart: each sits alone in its bucket, which is
  // taken out without a split. Here 1 to 6 events are pending at a time, 2^8 to 2^34 ps ahead, and
  // each one that runs moves or cancels another (a lone stale entry left behind, in a bucket of its
  // own or beside the live one) or schedules a new one, some at equal times. The order must be a
  // std::multimap's, and the clock must read each event's time.
  for (const std::uint64_t seed : {1u, 2u, 3u, 4u}) {
    CAPTURE(seed);
    EventQueue q;
    std::multimap<Time_ps, int> reference;
    std::map<int, std::pair<EventQueue::Handle, std::multimap<Time_ps, int>::iterator>> live;
    std::vector<int> popped;
    std::uint64_t rng = seed * 7777;
    const auto next = [&] {
      rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
      return rng >> 33;
    };
    const auto ahead = [&]() -> Time_ps {
      const Time_ps base = Time_ps{1} << (8 + next() % 27);
      return next() % 4 == 0 ? base : base + static_cast<Time_ps>(next() % static_cast<std::uint64_t>(base));
    };
    int next_id = 0;
    std::function<void()> schedule_one = [&] {
      const int id = next_id++;
      const Time_ps at = q.now_ps() + ahead();
      const auto h = q.schedule(at, [&, id] {
        popped.push_back(id);
        if (live.size() > 1 && next() % 3 == 0) {  // move another one, leaving a stale entry
          auto it = live.lower_bound(static_cast<int>(next() % static_cast<std::uint64_t>(next_id)));
          if (it == live.end()) it = live.begin();
          if (it->first != id) {
            const Time_ps to = q.now_ps() + ahead();
            REQUIRE(q.reschedule(it->second.first, to));
            reference.erase(it->second.second);
            it->second.second = reference.emplace(to, it->first);
          }
        }
        if (live.size() > 2 && next() % 5 == 0) {  // cancel another one
          auto it = live.begin();
          if (it->first != id) {
            REQUIRE(q.cancel(it->second.first));
            reference.erase(it->second.second);
            live.erase(it);
          }
        }
        if (live.size() < 7) schedule_one();
        if (live.size() < 3) schedule_one();
      });
      live[id] = {h, reference.emplace(at, id)};
    };
    schedule_one();
    schedule_one();
    for (int step = 0; step < 20'000 && !reference.empty(); ++step) {
      const auto expected = reference.begin();
      const int id = expected->second;
      const Time_ps at = expected->first;
      reference.erase(expected);
      live.erase(id);
      REQUIRE(q.run_next());
      REQUIRE(popped.back() == id);
      REQUIRE(q.now_ps() == at);
      REQUIRE(q.size() == reference.size());
    }
    CHECK(popped.size() == 20'000);
  }
}
