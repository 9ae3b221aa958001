// The tutorial's host (Sources/ZeroBridge/ZeroBridge.docc/Tutorials): serves Add and CountTo until SIGINT or SIGTERM.
//
//     swift run calculator-host tcp://127.0.0.1:5555
import Calculator
import Foundation
import ZeroBridge

let endpoint = CommandLine.arguments.dropFirst().first ?? "tcp://127.0.0.1:5555"
let host = try makeCalculatorHost(endpoint: endpoint)
try host.start()
// Front-ends (and the tutorial's test) read the endpoint from this line: port 0 (`tcp://127.0.0.1:*`) picks a free one.
// Written at once (print() would hold it in a buffer while stdout is a pipe).
FileHandle.standardOutput.write(Data("calculator ready \(host.boundEndpoint ?? endpoint)\n".utf8))
try await host.runUntilSignalled()
