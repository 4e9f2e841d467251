package clientconf_test

import (
	"fmt"

	"github.com/plasmafs/plasma/internal/clientconf"
)

// The client configuration file uses the original Plasma syntax.
func ExampleParse() {
	entries, err := clientconf.Parse(`plasmafs {
	  cluster {
	    clustername = "c1"; security = "privacy"; credential = "/home/me/me.pem";
	    node { addr = "10.0.0.1:2730" }; node { addr = "10.0.0.2:2730" };
	  };
	}`)
	e := entries[0]
	fmt.Println(e.Name, e.Namenodes, e.Security, e.Credential, err)
	// Output: c1 [10.0.0.1:2730 10.0.0.2:2730] privacy /home/me/me.pem <nil>
}
