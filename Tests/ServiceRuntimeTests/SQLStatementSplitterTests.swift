import Testing

@testable import ServiceRuntime

@Suite("SQL statement splitter")
struct SQLStatementSplitterTests {
    @Test func splitsAtTopLevelSemicolonsOnly() throws {
        let sql = """
            -- a comment; with a semicolon
            CREATE TABLE a (id int, note text DEFAULT 'x;y');
            /* block; comment */
            INSERT INTO a VALUES (1, 'it''s; fine');
            CREATE FUNCTION f() RETURNS trigger AS $body$
            BEGIN
              NEW.note := 'a;b'; RETURN NEW;
            END;
            $body$ LANGUAGE plpgsql;
            DO $$ BEGIN PERFORM 1; END $$;
            SELECT "weird;name" FROM a
            """
        let statements = SQLStatementSplitter.split(sql)
        try #require(statements.count == 5)
        #expect(statements[0].hasSuffix("DEFAULT 'x;y')"))
        #expect(statements[1].hasSuffix("'it''s; fine')"))
        #expect(statements[2].contains("NEW.note := 'a;b'; RETURN NEW;"))
        #expect(statements[3] == "DO $$ BEGIN PERFORM 1; END $$")
        #expect(statements[4] == #"SELECT "weird;name" FROM a"#)
    }

    @Test func commentOnlyScriptHasNoStatements() {
        #expect(SQLStatementSplitter.split("-- nothing here;\n\n").isEmpty)
    }
}
