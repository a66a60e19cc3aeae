// SPDX-License-Identifier: Apache-2.0
// Linked into every test binary of a ThreadSanitizer build (KVPORT_TSAN, cmake/kvport.cmake).
//
// libstdc++ (GCC 11+) locks a std::timed_mutex with a steady_clock deadline (try_lock_until,
// try_lock_for) through pthread_mutex_clocklock, and a std::shared_timed_mutex through
// pthread_rwlock_clock{rd,wr}lock. GCC 12's libtsan (and clang 14's) intercepts none of the
// three (llvm/llvm-project#62623, google/sanitizers#1620): TSan never sees such a lock taken,
// reports the matching unlock as "unlock of an unlocked mutex", and misses the happens-before
// edges the lock creates, which would then show up as false data races on what it guards.
// client::Connection and client::ConnectionPool lock timed mutexes this way.
//
// Rather than suppress those reports (and lose the edges), these definitions, which the
// executable's symbols take precedence over libc's, do the same wait through the *timed*
// variants, which libtsan does intercept: the deadline on `clock` becomes the same remaining
// time on CLOCK_REALTIME. The only difference from glibc's own functions is that a jump of the
// wall clock during the wait shortens or stretches it, which tests never do. Nothing outside
// TSan test builds links this file.
#include <pthread.h>
#include <time.h>

#include <cerrno>
#include <cstdint>
#include <limits>

namespace {

constexpr int64_t kNanosPerSecond = 1'000'000'000;

// The CLOCK_REALTIME time at which `abstime` on `clock` will be reached (saturating; a deadline
// already passed maps to now, at which the timed functions still try the lock once).
bool ToRealtime(clockid_t clock, const timespec* abstime, timespec* out) {
  if (clock == CLOCK_REALTIME) {
    *out = *abstime;
    return true;
  }
  if (clock != CLOCK_MONOTONIC) return false;
  timespec now_clock{};
  timespec now_real{};
  clock_gettime(CLOCK_MONOTONIC, &now_clock);
  clock_gettime(CLOCK_REALTIME, &now_real);
  int64_t sec = 0;
  int64_t nsec = int64_t{abstime->tv_nsec} - now_clock.tv_nsec;
  if (__builtin_sub_overflow(int64_t{abstime->tv_sec}, int64_t{now_clock.tv_sec}, &sec) ||
      sec > std::numeric_limits<int64_t>::max() / 2) {
    *out = now_real;  // "never": a century on, beyond any test's run
    out->tv_sec += time_t{100} * 365 * 24 * 3600;
    return true;
  }
  if (sec < 0 || (sec == 0 && nsec <= 0)) {
    *out = now_real;
    return true;
  }
  sec += now_real.tv_sec;
  nsec += now_real.tv_nsec;
  while (nsec < 0) {
    nsec += kNanosPerSecond;
    --sec;
  }
  while (nsec >= kNanosPerSecond) {
    nsec -= kNanosPerSecond;
    ++sec;
  }
  out->tv_sec = static_cast<time_t>(sec);
  out->tv_nsec = static_cast<long>(nsec);
  return true;
}

}  // namespace

extern "C" {

int pthread_mutex_clocklock(pthread_mutex_t* __restrict mutex, clockid_t clock,
                            const timespec* __restrict abstime) noexcept {
  timespec realtime{};
  if (!ToRealtime(clock, abstime, &realtime)) return EINVAL;
  return pthread_mutex_timedlock(mutex, &realtime);
}

int pthread_rwlock_clockrdlock(pthread_rwlock_t* __restrict rwlock, clockid_t clock,
                               const timespec* __restrict abstime) noexcept {
  timespec realtime{};
  if (!ToRealtime(clock, abstime, &realtime)) return EINVAL;
  return pthread_rwlock_timedrdlock(rwlock, &realtime);
}

int pthread_rwlock_clockwrlock(pthread_rwlock_t* __restrict rwlock, clockid_t clock,
                               const timespec* __restrict abstime) noexcept {
  timespec realtime{};
  if (!ToRealtime(clock, abstime, &realtime)) return EINVAL;
  return pthread_rwlock_timedwrlock(rwlock, &realtime);
}

}  // extern "C"
