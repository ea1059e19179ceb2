#include <doctest/doctest.h>

#include <cstdint>
#include <iterator>
#include <map>
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
