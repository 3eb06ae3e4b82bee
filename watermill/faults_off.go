//go:build !tributarywm_faults

package tributarywm

// fault reports whether the deliberately broken behaviour name is switched
// on. Only a build with the tributarywm_faults tag has faults (see
// faults_on.go); here it is constant false and the compiler drops the
// broken branches.
func fault(string) bool { return false }
