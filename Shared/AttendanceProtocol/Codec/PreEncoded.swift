/// A value encoded once for several uses: written in any layout (`bytes(_:)`), or nested in a message
/// the codec encodes (it is `Encodable`), without walking the value through `Encodable` again.
///
/// The gateway fingerprints a device payload (canonical bytes) and then produces it inside its
/// envelope (compact bytes): one encoding serves both.
public struct PreEncoded<Value: Encodable & Sendable>: Sendable, Encodable {
    public let value: Value
    private let tree: Tree

    public init(_ value: Value) throws(ProtocolEncodingError) {
        self.value = value
        do {
            tree = Tree(try OrderedJSONEncoder.encode(value))
        } catch {
            throw ProtocolCodec.encodingError(from: error)
        }
    }

    /// The value's bytes in `codec`'s layout: the same bytes `codec.encode(value)` gives.
    public func bytes(_ codec: ProtocolCodec) -> [UInt8] {
        codec.write(tree.root)
    }

    /// Inside the codec's own encoder, the kept encoding; in any other encoder, the value's own.
    public func encode(to encoder: any Encoder) throws {
        if let ordered = encoder as? OrderedJSONEncoder {
            ordered.set(tree.root)
        } else {
            try value.encode(to: encoder)
        }
    }

    /// The encoded tree is built once in `init` and only read afterwards (writers never change it),
    /// so sharing it across tasks is safe although its nodes are classes.
    private final class Tree: @unchecked Sendable {
        let root: EncodedValue
        init(_ root: EncodedValue) { self.root = root }
    }
}
