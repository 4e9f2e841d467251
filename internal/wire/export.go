package wire

// Encoders of messages' parts for other durable formats (the namenode's
// commit log encodes its changes with them).

// EncodeAttr appends a's encoding.
func EncodeAttr(e *Enc, a *Attr) { encAttr(e, a) }

// DecodeAttr decodes what EncodeAttr wrote.
func DecodeAttr(d *Dec) *Attr { return decAttr(d) }

// EncodeExtents appends the encoding of a block list.
func EncodeExtents(e *Enc, xs []Extent) { encExtents(e, xs) }

// DecodeExtents decodes what EncodeExtents wrote.
func DecodeExtents(d *Dec) []Extent { return decExtents(d) }
