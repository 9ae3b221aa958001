/// Conversation results as JUnit XML, the report format CI systems read.
///
/// One `<testsuite>` holds a `<testcase>` per conversation (`name`: its description, `classname`: its file);
/// a failed one carries a `<failure>` with the summary as `message` and the whole account as text. For example:
/// ```swift
/// try JUnitReport.xml(for: results).write(toFile: "replay.xml", atomically: true, encoding: .utf8)
/// ```
public enum JUnitReport {
    public static func xml(for results: [ConversationResult], suiteName: String = "zerobridge replay") -> String {
        let failures = results.filter { $0.failure != nil }.count
        let skipped = results.filter { $0.notRun != nil }.count
        let total = results.reduce(0) { $0 + $1.seconds }
        var xml = #"<?xml version="1.0" encoding="UTF-8"?>"# + "\n"
        xml += #"<testsuites name="\#(escape(suiteName))" tests="\#(results.count)" failures="\#(failures)" errors="0" time="\#(format(total))">"# + "\n"
        xml += #"  <testsuite name="\#(escape(suiteName))" tests="\#(results.count)" failures="\#(failures)" errors="0" skipped="\#(skipped)" time="\#(format(total))">"# + "\n"
        for result in results {
            let attributes = #"name="\#(escape(result.description))" classname="\#(escape(result.file))" time="\#(format(result.seconds))""#
            if let failure = result.failure {
                xml += "    <testcase \(attributes)>\n"
                xml += #"      <failure message="\#(escape(failure.summary))" type="mismatch">\#(escape(failure.description))</failure>"# + "\n"
                xml += "    </testcase>\n"
            } else if let reason = result.notRun {
                xml += "    <testcase \(attributes)>\n"
                xml += #"      <skipped message="\#(escape(reason))"/>"# + "\n"
                xml += "    </testcase>\n"
            } else {
                xml += "    <testcase \(attributes)/>\n"
            }
        }
        xml += "  </testsuite>\n</testsuites>\n"
        return xml
    }

    private static func format(_ seconds: Double) -> String {
        String(Double(Int((seconds * 1000).rounded())) / 1000)
    }

    /// Escapes text for XML attributes and content; characters XML 1.0 cannot hold at all become U+FFFD.
    static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&apos;"
            case "\n": escaped += "&#10;"
            case "\t", "\r": escaped += "&#\(scalar.value);"
            default:
                let allowed = scalar.value >= 0x20 && scalar.value != 0xFFFE && scalar.value != 0xFFFF
                escaped.unicodeScalars.append(allowed ? scalar : "\u{FFFD}")
            }
        }
        return escaped
    }
}
