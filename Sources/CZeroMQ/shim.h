#ifndef ZEROBRIDGE_CZEROMQ_SHIM_H
#define ZEROBRIDGE_CZEROMQ_SHIM_H

#include <zmq.h>
#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <pthread.h>
#include <poll.h>

// errno is a macro over a thread-local; Swift cannot read it portably, so read it here.
static inline int czmq_errno(void) { return zmq_errno(); }

// The C library's errno, for calls outside libzmq (eventfd, read, write).
static inline int czmq_errno_sys(void) { return errno; }

// zmq_msg_t is an opaque 64-byte struct; Swift needs its size to allocate it inline.
static inline size_t czmq_msg_size(void) { return sizeof(zmq_msg_t); }

#endif
