// SPDX-License-Identifier: Apache-2.0
// Thread-safety annotations for clang's -Wthread-safety, and a mutex that carries them.
//
// clang checks at compile time that data declared GUARDED_BY(mu) is only touched with mu held,
// that functions declared REQUIRES(mu) are only called with it held, and so on. The macros
// expand to nothing on other compilers (GCC builds are unchecked but identical), so they cost
// nothing at run time. cmake/kvport.cmake turns the analysis on, as an error, for clang builds
// of our code (the fuzz lane builds store/ and server/ with clang, so CI checks them).
//
// libstdc++'s std::mutex and std::lock_guard are not annotated, so the analysis cannot see them
// being taken: annotated code uses kvport::Mutex and kvport::MutexLock below instead.
//
//   class Table {
//     void Add(int v) EXCLUDES(mu_) { MutexLock lock(mu_); values_.push_back(v); }
//     void AddLocked(int v) REQUIRES(mu_) { values_.push_back(v); }
//     Mutex mu_;
//     std::vector<int> values_ GUARDED_BY(mu_);
//   };
//
// What the attributes mean is documented with clang (ThreadSafetyAnalysis.html); the macro
// names are the customary ones.
#pragma once

#include <mutex>

#if defined(__clang__)
#define KVPORT_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define KVPORT_THREAD_ANNOTATION_(x)
#endif

// A type that is a lock ("mutex" names the kind in clang's messages).
#define CAPABILITY(x) KVPORT_THREAD_ANNOTATION_(capability(x))
// An RAII type that acquires a capability in its constructor and releases it in its destructor.
#define SCOPED_CAPABILITY KVPORT_THREAD_ANNOTATION_(scoped_lockable)

// Data members: read or written only with the capability held.
#define GUARDED_BY(x) KVPORT_THREAD_ANNOTATION_(guarded_by(x))
// Pointer members: the pointee is accessed only with the capability held.
#define PT_GUARDED_BY(x) KVPORT_THREAD_ANNOTATION_(pt_guarded_by(x))

// Lock order: this capability is taken after / before the listed ones (clang checks these only
// with -Wthread-safety-beta; they document the order either way).
#define ACQUIRED_AFTER(...) KVPORT_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#define ACQUIRED_BEFORE(...) KVPORT_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))

// Functions: the caller must hold (exclusively / shared) the capabilities.
#define REQUIRES(...) KVPORT_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) KVPORT_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))
// Functions: the caller must not hold the capabilities (the function takes them itself).
#define EXCLUDES(...) KVPORT_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))

// Functions that take or drop a capability and return with it held / released. Without an
// argument, on a member function of a CAPABILITY type: the object itself.
#define ACQUIRE(...) KVPORT_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define RELEASE(...) KVPORT_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) KVPORT_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
// Functions that check (at run time, or not at all) that the capability is held; the analysis
// assumes it is from then on.
#define ASSERT_CAPABILITY(x) KVPORT_THREAD_ANNOTATION_(assert_capability(x))
// Functions that return a reference to the given capability.
#define RETURN_CAPABILITY(x) KVPORT_THREAD_ANNOTATION_(lock_returned(x))

// Turns the analysis off for one function. Use sparingly, with a comment saying why the
// function is safe anyway.
#define NO_THREAD_SAFETY_ANALYSIS KVPORT_THREAD_ANNOTATION_(no_thread_safety_analysis)

namespace kvport {

// std::mutex with annotations: not recursive; Lock() blocks, TryLock() does not. Not movable.
// (A mutex that only pairs with a std::condition_variable and guards no data may stay a
// std::mutex.)
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

  // Tells the analysis that the caller holds this mutex where it cannot prove it (checks
  // nothing at run time).
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() RELEASE() { mu_.Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

}  // namespace kvport
