// SPDX-License-Identifier: Apache-2.0
import AuthController
import Foundation
import Testing

/// The `Date`s of the Swift API and the microseconds of the settings file and the D-Bus API.
@Suite("Timestamp: Date and microseconds")
struct TimestampTests {
    @Test("a time in microseconds survives the trip through Date exactly, until 2070",
          arguments: [UInt64(0), 1, 999_999, 978_307_200_000_001, 1_795_000_000_123_456, 1_795_000_000_999_999, 3_000_000_000_000_001])
    func roundTrip(_ microseconds: UInt64) {
        #expect(Timestamp.microseconds(Timestamp.date(microseconds: microseconds)) == microseconds)
    }

    @Test("a Date is written as the settings file and the documents write microseconds: whole seconds, UTC")
    func rfc3339() {
        let date = Timestamp.date(microseconds: 1_795_000_000_999_999)
        #expect(Timestamp.rfc3339(date) == "2026-11-18T11:06:40Z")
        #expect(Timestamp.rfc3339(date) == Timestamp.rfc3339(microseconds: 1_795_000_000_999_999))
    }

    @Test("a date before 1970 is 0 microseconds")
    func beforeTheEpoch() {
        #expect(Timestamp.microseconds(Timestamp.date(microseconds: 5) - 10) == 0)
    }
}
