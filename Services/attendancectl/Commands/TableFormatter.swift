/// Aligned plain-text tables for the terminal: one header row and data rows in columns two spaces
/// apart, or label/value pairs. Widths count characters; every cell is one line (newlines and tabs
/// become spaces); rows shorter than the header are padded; no line ends in spaces.
package enum TableFormatter {
    /// `headers` as the first row, then `rows`, every column as wide as its widest cell.
    package static func render(headers: [String], rows: [[String]]) -> String {
        let columnCount = max(headers.count, rows.map(\.count).max() ?? 0)
        guard columnCount > 0 else { return "" }
        let table = ([headers] + rows).map { row in
            (0..<columnCount).map { $0 < row.count ? singleLine(row[$0]) : "" }
        }
        let widths = (0..<columnCount).map { column in table.map { $0[column].count }.max() ?? 0 }
        return table.map { line(cells: $0, widths: widths) }.joined(separator: "\n")
    }

    /// One `label:  value` line per pair, the values aligned.
    package static func render(pairs: [(String, String)]) -> String {
        let labels = pairs.map { singleLine($0.0) + ":" }
        let width = labels.map(\.count).max() ?? 0
        return zip(labels, pairs).map { label, pair in
            line(cells: [label, singleLine(pair.1)], widths: [width, 0])
        }.joined(separator: "\n")
    }

    static func line(cells: [String], widths: [Int]) -> String {
        var text = ""
        for (index, cell) in cells.enumerated() {
            if index > 0 { text += "  " }
            text += cell
            if index < cells.count - 1 { text += String(repeating: " ", count: max(0, widths[index] - cell.count)) }
        }
        while text.last == " " { text.removeLast() }
        return text
    }

    static func singleLine(_ text: String) -> String {
        guard text.contains(where: { $0.isNewline || $0 == "\t" }) else { return text }
        return text.split(whereSeparator: { $0.isNewline || $0 == "\t" }).joined(separator: " ")
    }
}
