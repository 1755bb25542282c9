import AttendanceCtlCommands
import AttendanceProtocol
import Testing

@Suite("TableFormatter")
struct TableFormatterTests {
    @Test func columnsAreAsWideAsTheirWidestCellTwoSpacesApart() {
        let text = TableFormatter.render(
            headers: ["ID", "NAME", "STATUS"], rows: [["b-1", "Main entrance", "active"], ["beacon-22", "Lobby", "lost"]])
        #expect(
            text == """
                ID         NAME           STATUS
                b-1        Main entrance  active
                beacon-22  Lobby          lost
                """)
    }

    @Test func noLineEndsInSpacesAndShortRowsArePadded() {
        let text = TableFormatter.render(headers: ["A", "B", "C"], rows: [["1"], ["22", "", ""]])
        #expect(text == "A   B  C\n1\n22")
        #expect(text.split(separator: "\n").allSatisfy { $0.last != " " })
    }

    @Test func widthsCountCharactersNotBytes() throws {
        let text = TableFormatter.render(headers: ["NAME", "X"], rows: [["Nguyễn Văn An", "1"], ["Bo", "2"]])
        let lines = text.split(separator: "\n").map(String.init)
        try #require(lines.count > 2)
        #expect(lines[1] == "Nguyễn Văn An  1")
        #expect(lines[2] == "Bo             2")
    }

    @Test func cellsAreOneLine() {
        let text = TableFormatter.render(headers: ["A", "B"], rows: [["multi\nline\tcell", "x"]])
        #expect(text == "A                B\nmulti line cell  x")
    }

    @Test func pairsAlignTheirValues() {
        let text = TableFormatter.render(pairs: [("id", "org-1"), ("created", "2025-09-18T08:30:00.000Z"), ("name", "")])
        #expect(
            text == """
                id:       org-1
                created:  2025-09-18T08:30:00.000Z
                name:
                """)
    }

    @Test func emptyInputs() {
        #expect(TableFormatter.render(headers: [], rows: []) == "")
        #expect(TableFormatter.render(headers: ["ID", "NAME"], rows: []) == "ID  NAME")
        #expect(TableFormatter.render(pairs: []) == "")
    }
}
