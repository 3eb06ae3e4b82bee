package porcupine_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/f91dcac0/tributary/porcupine"
)

// TestOptionsNonDefault: the zero Options lists nothing; each field set
// alone is listed, by its name, with its value; all set are listed in the
// fields' order, and String writes them so.
func TestOptionsNonDefault(t *testing.T) {
	require.Empty(t, porcupine.Options{}.NonDefault())
	require.Equal(t, "", porcupine.Options{}.String())

	typ := reflect.TypeFor[porcupine.Options]()
	for i := range typ.NumField() {
		var o porcupine.Options
		f := reflect.ValueOf(&o).Elem().Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		default:
			f.SetInt(3)
		}
		got := o.NonDefault()
		require.Len(t, got, 1, "%s set alone", typ.Field(i).Name)
		require.Equal(t, typ.Field(i).Name, got[0].Field)
		require.Equal(t, f.Interface(), got[0].Value)
	}

	o := porcupine.Options{ReplayWindow: 2, AckTimeout: 10 * time.Second, MaxMessageBytes: 9, SessionTimeout: time.Minute, TestClock: true}
	require.Equal(t, []porcupine.Option{
		{Field: "ReplayWindow", Value: int32(2)}, {Field: "AckTimeout", Value: 10 * time.Second},
		{Field: "MaxMessageBytes", Value: 9}, {Field: "SessionTimeout", Value: time.Minute}, {Field: "TestClock", Value: true},
	}, o.NonDefault())
	require.Equal(t, " window=2 acktimeout=10s maxbytes=9 sessiontimeout=1m0s testclock", o.String())
}
