// SPDX-License-Identifier: Apache-2.0
// Linked into every test binary of an ASan build (KVPORT_SANITIZE, cmake/kvport.cmake); the
// test-asan lane (Makefile) sets the same flag in ASAN_OPTIONS for the processes tests exec.
//
// intercept_tls_get_addr=0: GCC 12's libasan (Debian 12) records, per thread, the dynamic TLS
// block of each dlopen'ed library as __tls_get_addr hands it out, and LeakSanitizer's tracer
// scans those ranges at exit. To find a block's extent it guesses at glibc's layout: a block
// that starts 16 bytes past a page boundary is taken to follow a glibc 2.19-2.24 header, and the
// two words before it are read as {size, start}. Since glibc 2.25 there is no such header: the
// block is malloc'ed, and those words are ASan's own chunk header. libucs (UCX, dlopen'ed) has a
// 36-byte TLS segment, ASan hands its 64-byte chunks out in a row, so one such block in 64
// starts at page offset 16, and the thread that gets it records the range
// [(thread id << 32) | stack id, + ~144 GiB). If that thread is alive at the leak check (UCX's
// async thread; or the main thread, which touches libucs's TLS in its own UCX calls), the tracer
// faults on the range ("Tracer caught signal 11: addr=0x...", "LeakSanitizer has encountered a
// fatal error"), leak or no leak. Which thread's block lands there depends on the order of
// allocations across threads: a rare failure, likelier on a loaded machine, and not one that
// quiet threads at exit would avoid. With the flag off nothing is guessed, so nothing bogus is
// scanned; the blocks stay roots all the same, as chunks ld.so allocated (LeakSanitizer's
// use_ld_allocations, on by default), so a pointer held only in a library's TLS is no leak and
// a real leak is still reported. Later compiler-rt asks the allocator for the block instead.
extern "C" __attribute__((visibility("default"), used)) const char* __asan_default_options() {
  return "intercept_tls_get_addr=0";
}
