module github.com/puremetal/puremetal

go 1.26.0

require (
	github.com/ardanlabs/jinja v1.8.0
	github.com/ebitengine/purego v0.11.3
	golang.org/x/sys v0.50.0
	golang.org/x/text v0.44.0
)
