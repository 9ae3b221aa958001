import Foundation

/// The wall clock that request deadlines are written in: Unix time in milliseconds (SPEC 7.3).
package enum WallClock {
    package static var milliseconds: Int {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return now.tv_sec * 1000 + now.tv_nsec / 1_000_000
    }
}
