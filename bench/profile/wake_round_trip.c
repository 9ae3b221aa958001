// What one thread waking another costs this machine, with nothing else in the way: two threads pass a token back
// and forth through two eventfds (a blocking read each, as a sleeping socket thread waits), placed on two CPUs, on one
// CPU, and where the scheduler puts them. Prints, per placement, the round trip (two wake-ups) in wall time and in
// CPU time of the process. A sequential request wakes three threads of the host (libzmq's I/O thread twice, the
// loop's thread once) and as many of the peer: on a VM whose cross-CPU wake-up costs microseconds of CPU, that,
// not the protocol's code, sets the floor of a sequential call (bench/RESULTS.md, issue 26).
//
//   cc -O2 -pthread bench/profile/wake_round_trip.c -o /tmp/wake_round_trip && /tmp/wake_round_trip [ROUND_TRIPS]
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct pair {
    int there, back;  // eventfds: the token goes out on `there` and comes back on `back`
    long round_trips;
    int echo_cpu;     // -1: wherever the scheduler puts the echo thread
};

static double seconds(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pin(int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int failed = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (failed) {
        fprintf(stderr, "wake_round_trip: CPU %d: %s\n", cpu, strerror(failed));
        exit(1);
    }
}

static void check(ssize_t done) {
    if (done != sizeof(uint64_t)) {
        fprintf(stderr, "wake_round_trip: eventfd: %s\n", strerror(errno));
        exit(1);
    }
}

// Waits for the token on `from` (blocking: the thread sleeps), then passes it on to `to`.
static void move(int from, int to) {
    uint64_t token;
    check(read(from, &token, sizeof token));
    check(write(to, &token, sizeof token));
}

static void *echo(void *argument) {
    struct pair *pair = argument;
    pin(pair->echo_cpu);
    for (long i = 0; i < pair->round_trips; i++) move(pair->there, pair->back);
    return NULL;
}

static void measure(const char *placement, int cpu, int echo_cpu, long round_trips) {
    struct pair pair = {eventfd(0, EFD_CLOEXEC), eventfd(0, EFD_CLOEXEC), round_trips, echo_cpu};
    if (pair.there < 0 || pair.back < 0) {
        fprintf(stderr, "wake_round_trip: eventfd: %s\n", strerror(errno));
        exit(1);
    }
    cpu_set_t all;
    if (sched_getaffinity(0, sizeof all, &all) != 0) {
        fprintf(stderr, "wake_round_trip: sched_getaffinity: %s\n", strerror(errno));
        exit(1);
    }
    pin(cpu);
    pthread_t thread;
    if (pthread_create(&thread, NULL, echo, &pair) != 0) {
        fprintf(stderr, "wake_round_trip: no thread\n");
        exit(1);
    }
    uint64_t token = 1;
    double wall = seconds(CLOCK_MONOTONIC), cpu_time = seconds(CLOCK_PROCESS_CPUTIME_ID);
    for (long i = 0; i < round_trips; i++) {
        check(write(pair.there, &token, sizeof token));
        check(read(pair.back, &token, sizeof token));
    }
    wall = seconds(CLOCK_MONOTONIC) - wall;
    cpu_time = seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu_time;
    pthread_join(thread, NULL);
    pthread_setaffinity_np(pthread_self(), sizeof all, &all);
    close(pair.there);
    close(pair.back);
    printf("%-22s round trip %6.1f us wall, %6.1f us CPU (%ld round trips)\n", placement, wall * 1e6 / round_trips,
           cpu_time * 1e6 / round_trips, round_trips);
}

int main(int argc, char **argv) {
    long round_trips = 20000;
    if (argc >= 2) {
        char *end = NULL;
        errno = 0;
        round_trips = argc == 2 ? strtol(argv[1], &end, 10) : 0;
        if (argc > 2 || errno != 0 || end == argv[1] || *end != '\0' || round_trips < 1) {
            fprintf(stderr, "usage: wake_round_trip [ROUND_TRIPS]  (a whole number, 1 or more; 20000 if left out)\n");
            return 2;
        }
    }
    // The first two CPUs this process may run on (a cpuset may leave out CPU 0).
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        fprintf(stderr, "wake_round_trip: sched_getaffinity: %s\n", strerror(errno));
        return 1;
    }
    int first = -1, second = -1;
    for (int cpu = 0; cpu < CPU_SETSIZE && second < 0; cpu++) {
        if (!CPU_ISSET(cpu, &allowed)) continue;
        if (first < 0) first = cpu; else second = cpu;
    }
    char label[64];
    if (second >= 0) {
        snprintf(label, sizeof label, "two CPUs (%d and %d)", first, second);
        measure(label, first, second, round_trips);
    }
    snprintf(label, sizeof label, "one CPU (%d)", first);
    measure(label, first, first, round_trips);
    measure("as scheduled", -1, -1, round_trips);
    return 0;
}
