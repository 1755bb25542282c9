#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Thin, EINTR-safe wrappers over the POSIX calls the outbox needs. Every failure carries the call, the
/// path and `errno`.
enum FileIO {
    static func error(_ operation: String, _ path: String) -> OutboxError {
        .io(operation: operation, path: path, errno: errno)
    }

    static func open(_ path: String, flags: Int32, mode: mode_t = 0o600) throws(OutboxError) -> Int32 {
        while true {
            let fd = cOpen(path, flags, mode)
            if fd >= 0 { return fd }
            if errno == EINTR { continue }
            throw error("open", path)
        }
    }

    /// Writes all of `bytes` at `offset` (pwrite loop: short writes and EINTR are retried).
    static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64, path: String) throws(OutboxError) {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + Int64(done)))
            if n < 0 {
                if errno == EINTR { continue }
                throw error("pwrite", path)
            }
            done += n
        }
    }

    static func write(_ fd: Int32, _ bytes: [UInt8], at offset: Int64, path: String) throws(OutboxError) {
        guard !bytes.isEmpty else { return }
        let result: Result<Void, OutboxError> = bytes.withUnsafeBytes { raw in
            do throws(OutboxError) {
                try write(fd, raw, at: offset, path: path)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }

    static func read(_ fd: Int32, count: Int, at offset: Int64, path: String) throws(OutboxError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var done = 0
        var failure: OutboxError?
        out.withUnsafeMutableBytes { raw in
            while done < count {
                let n = pread(fd, raw.baseAddress! + done, count - done, off_t(offset + Int64(done)))
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = error("pread", path)
                    return
                }
                if n == 0 { break } // end of file
                done += n
            }
        }
        if let failure { throw failure }
        if done < count { out.removeSubrange(done...) }
        return out
    }

    /// Makes what was written durable. On Darwin, `fsync` only hands the data to the drive, whose cache
    /// a power loss or a panic can drop; `F_FULLFSYNC` asks the drive to write it out (plain `fsync` stays
    /// as the fallback where the file system does not support it).
    static func fsync(_ fd: Int32, path: String) throws(OutboxError) {
        #if canImport(Darwin)
        if fcntl(fd, F_FULLFSYNC) == 0 { return }
        #endif
        while cFsync(fd) != 0 {
            if errno == EINTR { continue }
            throw error("fsync", path)
        }
    }

    static func truncate(_ fd: Int32, to size: Int64, path: String) throws(OutboxError) {
        while ftruncate(fd, off_t(size)) != 0 {
            if errno == EINTR { continue }
            throw error("ftruncate", path)
        }
    }

    static func size(_ fd: Int32, path: String) throws(OutboxError) -> Int64 {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw error("fstat", path) }
        return Int64(st.st_size)
    }

    static func close(_ fd: Int32) {
        _ = cClose(fd)
    }

    static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    static func unlink(_ path: String) {
        _ = cUnlink(path)
    }

    static func rename(_ from: String, _ to: String) throws(OutboxError) {
        guard cRename(from, to) == 0 else { throw error("rename", from + " -> " + to) }
    }

    /// fsync of the directory holding `path`, so a create or rename survives a power loss.
    static func fsyncDirectory(of path: String) throws(OutboxError) {
        let dir: String
        if let slash = path.lastIndex(of: "/") {
            dir = slash == path.startIndex ? "/" : String(path[..<slash])
        } else {
            dir = "."
        }
        let fd = try open(dir, flags: O_RDONLY)
        defer { close(fd) }
        try fsync(fd, path: dir)
    }
}

// The C library's calls under names `FileIO`'s own `open`, `fsync`, ... do not shadow: at file scope the
// unqualified names are the C functions.
@inline(__always) private func cOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 { open(path, flags, mode) }
@inline(__always) private func cFsync(_ fd: Int32) -> Int32 { fsync(fd) }
@inline(__always) private func cClose(_ fd: Int32) -> Int32 { close(fd) }
@inline(__always) private func cUnlink(_ path: String) -> Int32 { unlink(path) }
@inline(__always) private func cRename(_ from: String, _ to: String) -> Int32 { rename(from, to) }

/// Little-endian byte building for outbox records.
struct ByteWriter {
    var bytes: [UInt8] = []

    init(capacity: Int = 64) { bytes.reserveCapacity(capacity) }

    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func i64(_ v: Int64) { u64(UInt64(bitPattern: v)) }
    mutating func i32(_ v: Int32) { u32(UInt32(bitPattern: v)) }
    mutating func raw(_ v: [UInt8]) { bytes.append(contentsOf: v) }
}

/// Bounds-checked little-endian reading; every accessor returns nil past the end (a torn record).
struct ByteReader {
    let bytes: [UInt8]
    var position: Int
    let end: Int

    init(_ bytes: [UInt8], from start: Int, to end: Int) {
        self.bytes = bytes
        self.position = start
        self.end = end
    }

    var remaining: Int { end - position }

    mutating func u8() -> UInt8? {
        guard position + 1 <= end else { return nil }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func u32() -> UInt32? { littleEndian(UInt32.self) }
    mutating func u64() -> UInt64? { littleEndian(UInt64.self) }

    private mutating func littleEndian<T: FixedWidthInteger & UnsignedInteger>(_: T.Type) -> T? {
        let size = MemoryLayout<T>.size
        guard position + size <= end else { return nil }
        var v: T = 0
        for i in 0..<size { v |= T(bytes[position + i]) << (8 * i) }
        position += size
        return v
    }

    mutating func i64() -> Int64? { u64().map { Int64(bitPattern: $0) } }
    mutating func i32() -> Int32? { u32().map { Int32(bitPattern: $0) } }

    mutating func raw(_ count: Int) -> [UInt8]? {
        guard count >= 0, position + count <= end else { return nil }
        defer { position += count }
        return Array(bytes[position..<position + count])
    }

    mutating func skip(_ count: Int) -> Bool {
        guard count >= 0, position + count <= end else { return false }
        position += count
        return true
    }
}
