module kcr/testenv/kind/pullserver

go 1.26.0
