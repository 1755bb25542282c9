import Foundation
import Synchronization

/// A progress bar on the terminal's standard error (redrawn in place on a terminal, a line every
/// 10 % otherwise, so logs of scripted runs stay short).
package final class ProgressLine: Sendable {
    private let enabled: Bool
    private let isTerminal: Bool
    private let lastDecile = Mutex<Int>(-1)

    package init(enabled: Bool) {
        self.enabled = enabled
        isTerminal = isatty(2) != 0
    }

    package func update(fraction: Double, label: String) {
        guard enabled else { return }
        let f = min(max(fraction, 0), 1)
        let width = 30
        let filled = Int(f * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        let text = String(format: "[%@] %3d%% %@", bar, Int(f * 100), label)
        if isTerminal {
            write("\r\u{1B}[2K" + text)
        } else {
            let decile = Int(f * 10)
            let changed = lastDecile.withLock { last in
                if decile > last { last = decile; return true }
                return false
            }
            if changed { write(text + "\n") }
        }
    }

    package func message(_ text: String) {
        guard enabled else { return }
        write(text + "\n")
    }

    package func finish() {
        guard enabled else { return }
        if isTerminal { write("\n") }
        lastDecile.withLock { $0 = -1 }
    }

    private func write(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }
}
