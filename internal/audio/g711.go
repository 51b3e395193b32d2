package audio

// G.711 (ITU-T G.711, 1988): 8-bit logarithmic companding of 14-bit
// (μ-law) or 13-bit (A-law) linear samples. Decoding is a table lookup;
// encoding finds the segment of the biased magnitude.

var mulawTable, alawTable [256]int16

func init() {
	for i := range 256 {
		mulawTable[i] = mulawDecode(byte(i))
		alawTable[i] = alawDecode(byte(i))
	}
}

const (
	mulawBias = 0x84 // 132: added before companding, so segment 0 starts at 0
	mulawClip = 32635
)

// MulawEncode compands one sample to μ-law.
func MulawEncode(s int16) byte {
	v := int(s)
	sign := 0
	if v < 0 {
		v, sign = -v, 0x80
	}
	v = min(v, mulawClip) + mulawBias
	exp := 7
	for mask := 0x4000; v&mask == 0 && exp > 0; mask >>= 1 {
		exp--
	}
	mant := (v >> (exp + 3)) & 0x0f
	return ^byte(sign | exp<<4 | mant)
}

func mulawDecode(b byte) int16 {
	b = ^b
	exp := int(b>>4) & 0x07
	mant := int(b & 0x0f)
	v := ((mant<<3)+mulawBias)<<exp - mulawBias
	if b&0x80 != 0 {
		return int16(-v)
	}
	return int16(v)
}

// MulawDecode expands one μ-law byte.
func MulawDecode(b byte) int16 { return mulawTable[b] }

// AlawEncode compands one sample to A-law.
func AlawEncode(s int16) byte {
	v := int(s)
	sign := 0x80
	if v < 0 {
		v, sign = -v-1, 0
	}
	v >>= 3 // 13-bit magnitude
	var out int
	if v < 32 {
		out = v >> 1
	} else {
		exp := 1
		for x := v >> 5; x > 1 && exp < 7; x >>= 1 {
			exp++
		}
		mant := (v >> exp) & 0x0f
		out = exp<<4 | mant
	}
	return byte(sign|out) ^ 0x55
}

func alawDecode(b byte) int16 {
	b ^= 0x55
	exp := int(b>>4) & 0x07
	mant := int(b & 0x0f)
	var v int
	if exp == 0 {
		v = mant<<4 + 8
	} else {
		v = (mant<<4 + 0x108) << (exp - 1)
	}
	if b&0x80 == 0 {
		return int16(-v)
	}
	return int16(v)
}

// AlawDecode expands one A-law byte.
func AlawDecode(b byte) int16 { return alawTable[b] }

// DecodeMulaw expands src into dst (len(dst) >= len(src)) and returns the
// samples written; DecodeAlaw likewise.
func DecodeMulaw(dst []int16, src []byte) int {
	n := min(len(dst), len(src))
	for i := range n {
		dst[i] = mulawTable[src[i]]
	}
	return n
}

func DecodeAlaw(dst []int16, src []byte) int {
	n := min(len(dst), len(src))
	for i := range n {
		dst[i] = alawTable[src[i]]
	}
	return n
}

// EncodeMulaw compands src into dst and returns the bytes written;
// EncodeAlaw likewise.
func EncodeMulaw(dst []byte, src []int16) int {
	n := min(len(dst), len(src))
	for i := range n {
		dst[i] = MulawEncode(src[i])
	}
	return n
}

func EncodeAlaw(dst []byte, src []int16) int {
	n := min(len(dst), len(src))
	for i := range n {
		dst[i] = AlawEncode(src[i])
	}
	return n
}
