package event

import "testing"

func TestNamesRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for _, typ := range All() {
		name := typ.String()
		if name == "" || seen[name] {
			t.Fatalf("%d: name %q empty or repeated", typ, name)
		}
		seen[name] = true
		if back, ok := Parse(name); !ok || back != typ {
			t.Errorf("Parse(%q) = %v %v", name, back, ok)
		}
		if b, err := typ.MarshalText(); err != nil || string(b) != name {
			t.Errorf("MarshalText(%v) = %q %v", typ, b, err)
		}
	}
	if len(seen) != 25 {
		t.Errorf("%d events, want 25", len(seen))
	}
	if Type(0).Valid() || Type(200).Valid() {
		t.Error("zero or out-of-range type is valid")
	}
	if _, err := Type(0).MarshalText(); err == nil {
		t.Error("the zero type marshals")
	}
	if _, ok := Parse("exploded"); ok {
		t.Error("an unknown name parses")
	}
}
