//! `#[derive(Persistent)]` for Engram.
//!
//! Generates an `unsafe impl engram::Persistent` for a struct whose fields
//! are all `Persistent`: its stable type name (module path and ident, or
//! `#[engram(name = "...")]`), the offsets of its pool pointers (from each
//! field's own offsets, shifted by `offset_of!`), and a field signature for
//! the layout hash, so a program whose struct changed is refused by a pool
//! that recorded the old layout. Enums and unions are rejected: not every bit
//! pattern of them is a valid value.

use proc_macro::TokenStream;
use quote::{format_ident, quote};
use syn::{parse_macro_input, Data, DeriveInput, Fields, GenericParam, LitStr};

/// Derives `engram::Persistent`. The struct must also be `Copy`.
#[proc_macro_derive(Persistent, attributes(engram))]
pub fn derive_persistent(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand(mut input: DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let ident = input.ident.clone();
    let fields = match &input.data {
        Data::Struct(s) => s.fields.clone(),
        _ => {
            return Err(syn::Error::new_spanned(
                &input.ident,
                "Persistent can be derived for structs only (enum and union bit patterns are not all valid)",
            ))
        }
    };
    let mut name_override = None;
    for attr in &input.attrs {
        if attr.path().is_ident("engram") {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("name") {
                    name_override = Some(meta.value()?.parse::<LitStr>()?);
                    Ok(())
                } else {
                    Err(meta.error("expected `name = \"...\"`"))
                }
            })?;
        }
    }
    let type_params: Vec<_> = input
        .generics
        .params
        .iter()
        .filter_map(|p| if let GenericParam::Type(t) = p { Some(t.ident.clone()) } else { None })
        .collect();
    for p in input.generics.params.iter_mut() {
        if let GenericParam::Type(t) = p {
            t.bounds.push(syn::parse_quote!(::engram::Persistent));
        }
    }
    let (impl_g, ty_g, where_g) = input.generics.split_for_impl();
    let members: Vec<(proc_macro2::TokenStream, String, syn::Type)> = match &fields {
        Fields::Named(n) => n
            .named
            .iter()
            .map(|f| {
                let id = f.ident.clone().expect("named field");
                (quote!(#id), id.to_string(), f.ty.clone())
            })
            .collect(),
        Fields::Unnamed(u) => u
            .unnamed
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let idx = syn::Index::from(i);
                (quote!(#idx), i.to_string(), f.ty.clone())
            })
            .collect(),
        Fields::Unit => Vec::new(),
    };
    let base_name = match name_override {
        Some(l) => quote!(#l),
        None => quote!(concat!(module_path!(), "::", stringify!(#ident))),
    };
    let type_name_body = if type_params.is_empty() {
        quote!(::std::string::String::from(#base_name))
    } else {
        quote!({
            let params: ::std::vec::Vec<::std::string::String> =
                vec![#(<#type_params as ::engram::Persistent>::type_name()),*];
            format!("{}<{}>", #base_name, params.join(","))
        })
    };
    let ptr_calls = members.iter().map(|(m, _, ty)| {
        quote!(<#ty as ::engram::Persistent>::pointer_offsets(out, at + ::core::mem::offset_of!(Self, #m) as u32);)
    });
    let sig_parts = members.iter().map(|(m, label, ty)| {
        quote!(sig.push_str(&format!("{}:{}@{};", #label, <#ty as ::engram::Persistent>::signature(), ::core::mem::offset_of!(Self, #m)));)
    });
    let assert_fn = format_ident!("__engram_assert_fields_{}", ident);
    let field_tys = members.iter().map(|(_, _, ty)| ty);
    Ok(quote! {
        // SAFETY: every field is Persistent (checked by the bounds below), so
        // every bit pattern of each field is valid and its pointers are
        // reported; the struct adds no pointers of its own.
        unsafe impl #impl_g ::engram::Persistent for #ident #ty_g #where_g {
            fn type_name() -> ::std::string::String { #type_name_body }
            fn pointer_offsets(out: &mut ::std::vec::Vec<u32>, at: u32) {
                let _ = (&out, at);
                #(#ptr_calls)*
            }
            fn signature() -> ::std::string::String {
                let mut sig = format!("{}{{", <Self as ::engram::Persistent>::type_name());
                #(#sig_parts)*
                sig.push('}');
                sig
            }
        }
        #[allow(non_snake_case, dead_code)]
        fn #assert_fn #impl_g () #where_g {
            fn is_persistent<X: ::engram::Persistent>() {}
            #(is_persistent::<#field_tys>();)*
        }
    })
}
